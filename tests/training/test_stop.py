"""A training stops when told (training/stop.py, hf.StopCallback): a stop requested at update k ends
that update (or the next one's first micro-batch), the trainer saves its state, nothing further starts
(no checkpoint evaluation, no later phase or ablation), the training is stored as interrupted, and
`resume` reaches what an uninterrupted twin reaches. Through the CLI with a real SIGINT / SIGTERM too.
All on the tiny random model."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
from s3gym_tui.training import stop
from s3gym_tui.training.config import DistillConfig, GrpoConfig, SftConfig
from s3gym_tui.training.pipeline import Hooks, resume_training, train_from_run

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
# 4 examples, batch 1 x 2 accumulated: 2 updates per epoch, 4 in all, a checkpoint per epoch
SFT = dict(epochs=2, batch_size=1, grad_accum=2, learning_rate=1e-2)


@pytest.fixture(autouse=True)
def _no_stop_left():
    stop.clear()
    yield
    stop.clear()


def _source(store, game="trust", episodes=1):
    run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none", explore_episodes=episodes,
                                          eval_every=episodes, eval_episodes=1))
    return asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


def _stop_at(update: int, reason: str = "interrupted (Ctrl-C)"):
    """A train_event hook that requests a stop when update `update` is logged (as a signal would)."""
    seen = []

    def on_event(event):
        if event.kind == "step":
            seen.append(event.step)
            if event.step == update:
                stop.request(reason)

    return on_event, seen


def _adapter(path: Path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "adapter_model.safetensors"))


def _same_weights(a: Path, b: Path) -> None:
    """Bit for bit: a resumed training restores the twin's weights, optimizer, schedule and data order, and both
    start from the adapter the recipe's seed decides (hf.adapted), in one process with the same threads."""
    import torch

    wa, wb = _adapter(a), _adapter(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def _losses(store, training_id):
    return [(p.phase, p.step, p.loss) for p in store.trainings.losses(training_id)]


@pytest.mark.parametrize("update", [1, 2], ids=["mid-epoch", "at-an-epoch-end"])
def test_sft_stops_within_one_update_and_resumes_to_its_twin(store, tiny_base, update):
    source = _source(store)
    options = SftConfig(base=str(tiny_base), max_examples=4, eval_episodes=1, step_cap=1, **SFT)
    twin = stop.run(lambda: train_from_run(store, source.id, options)).training
    assert twin.status == "finished" and twin.steps == 4

    hook, seen = _stop_at(update)
    with pytest.raises(stop.TrainingStopped, match="Ctrl-C"):
        stop.run(lambda: train_from_run(store, source.id, options, Hooks(train_event=hook)))
    (training,) = [t for t in store.trainings.list(source_run=source.id) if t.id != twin.id]
    # the stored reason names the phase the stop reached: the update that was being logged
    assert training.status == "interrupted"
    assert training.error.startswith(f"interrupted (Ctrl-C) during SFT update {update}")
    assert f"s3gym resume {training.id}" in training.error
    # the update in progress ended it: no later update was logged or stored
    assert seen == list(range(1, update + 1)) and [s for _, s, _ in _losses(store, training.id)] == seen
    # nothing further started: no checkpoint recorded, no evaluation run; the trainer's state saved at k
    assert store.trainings.training_checkpoints(training.id) == [] and store.trainings.training_evals(training.id) == []
    trainer_dir = Path(training.directory) / "adapters" / "trainer"
    assert (trainer_dir / f"checkpoint-{update}" / "trainer_state.json").is_file()
    # an epoch finished before the stop keeps its adapter; one cut short saves none
    adapters = sorted(p.name for p in (Path(training.directory) / "adapters").glob("checkpoint-*"))
    assert adapters == (["checkpoint-1"] if update == 2 else [])

    outcome = stop.run(lambda: resume_training(store, training.id))
    done = outcome.training
    assert done.status == "finished" and done.error is None and done.steps == 4
    assert done.metrics["resumed_from"].endswith(f"checkpoint-{update}")
    assert [c.x for c in store.trainings.training_checkpoints(done.id)] == [0, 1, 2]
    assert [c.x for c in store.checkpoints.list(outcome.run.id)] == [0, 1, 2]
    # exactly the uninterrupted twin's result: each update's loss, and every adapter's weights
    ours, theirs = _losses(store, done.id), _losses(store, twin.id)
    assert [s for _, s, _ in ours] == [1, 2, 3, 4]
    assert ours == theirs
    for x in (1, 2):
        mine = {c.x: c.adapter for c in store.trainings.training_checkpoints(done.id)}[x]
        other = {c.x: c.adapter for c in store.trainings.training_checkpoints(twin.id)}[x]
        _same_weights(Path(mine), Path(other))


def test_grpo_stops_within_one_update_and_resumes(store, tiny_base):
    source = _source(store, episodes=2)
    options = GrpoConfig(reward="oracle", updates=4, num_generations=2, states_per_update=1, save_every=2,
                         max_completion_length=6, rollout_step_cap=1, learning_rate=1e-3, warm_start=0,
                         base=str(tiny_base), eval_episodes=1, step_cap=1)
    twin = stop.run(lambda: train_from_run(store, source.id, options)).training

    hook, seen = _stop_at(1, "terminated (SIGTERM)")
    with pytest.raises(stop.TrainingStopped):
        stop.run(lambda: train_from_run(store, source.id, options, Hooks(train_event=hook)))
    (training,) = [t for t in store.trainings.list(source_run=source.id) if t.id != twin.id]
    assert training.status == "interrupted" and training.error.startswith("terminated (SIGTERM) during GRPO")
    assert seen == [1] and [s for _, s, _ in _losses(store, training.id)] == [1]
    assert store.trainings.training_checkpoints(training.id) == [] and store.trainings.training_evals(training.id) == []
    assert (Path(training.directory) / "adapters" / "trainer" / "checkpoint-1").is_dir()

    outcome = stop.run(lambda: resume_training(store, training.id))
    done = outcome.training
    assert done.status == "finished" and done.steps == 4
    assert [c.x for c in store.trainings.training_checkpoints(done.id)] == [x.x for x in store.trainings.training_checkpoints(twin.id)]
    assert [c.step for c in store.trainings.training_checkpoints(done.id)] == [0, 2, 4]
    ours, theirs = _losses(store, done.id), _losses(store, twin.id)
    assert [s for _, s, _ in ours] == [1, 2, 3, 4]
    # exactly the twin's updates. The resumed trainer plays the states of update 1 again (skipping its batch)
    # with the resumed policy: they cannot differ here (rollout_step_cap 1: every state is an episode's first,
    # whatever the player replies), and each group's replies are drawn by their place (sampling.ReplySampler).
    # GRPO's logged loss is 0 in these updates (on-policy, no KL term): the gradients and the adapters say more
    assert ours == theirs
    assert [p.metrics["grad_norm"] for p in store.trainings.losses(done.id)] == \
        [p.metrics["grad_norm"] for p in store.trainings.losses(twin.id)]
    for x in (1, 2):
        mine = {c.x: c.adapter for c in store.trainings.training_checkpoints(done.id)}[x]
        other = {c.x: c.adapter for c in store.trainings.training_checkpoints(twin.id)}[x]
        _same_weights(Path(mine), Path(other))


def test_a_stop_in_distillation_phase_1_starts_no_later_phase(tiny_base, tmp_path, monkeypatch):
    from s3gym_tui.training.distill import DistillHooks, distill, resume_study

    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(tmp_path / "training"))
    with Store(tmp_path / "d.db") as store:
        ids = []
        for game in ("trust", "snake"):
            source = _source(store, game)
            options = SftConfig(base=str(tiny_base), max_examples=3, eval_episodes=1, step_cap=1, epochs=1,
                                batch_size=2, grad_accum=1, learning_rate=1e-2)
            ids.append(stop.run(lambda: train_from_run(store, source.id, options)).training.id)
        options = DistillConfig(rollout_episodes=1, rollout_step_cap=2, epochs=1, batch_size=1, grad_accum=1,
                                phase1_learning_rate=1e-2, updates=2, batch=2, max_completion_length=6, save_every=1,
                                learning_rate=1e-3, ablations=True)
        stages, seen = [], []

        def on_event(event):
            if event.kind == "step":  # phase 1 (SFT on the experts' trajectories) is the first to train
                seen.append(event.step)
                if event.step == 1:
                    stop.request("interrupted (Ctrl-C)")

        hooks = DistillHooks(train_event=on_event, stage=lambda s, i: stages.append(s))
        with pytest.raises(stop.TrainingStopped):
            stop.run(lambda: distill(store, ids, options, hooks))
        study = store.trainings.studies(limit=1)[0]
        assert study.status == "interrupted"
        roles = {t.role: t for t in store.trainings.list(study_id=study.id)}
        assert list(roles) == ["phase1"] and "phase 2" not in stages and "ablation" not in stages
        phase1 = roles["phase1"]
        assert phase1.status == "interrupted" and f"s3gym resume {study.id}" in phase1.error
        assert seen == [1] and [s for _, s, _ in _losses(store, phase1.id)] == [1]
        assert store.trainings.training_checkpoints(phase1.id) == []

        done = stop.run(lambda: resume_study(store, study.id))
        assert done.status == "finished"
        roles = {t.role: t for t in store.trainings.list(study_id=study.id)}
        assert sorted(roles) == ["mixed-sft", "off-only", "on-only", "phase1", "phase2"]
        assert all(t.status == "finished" for t in roles.values())
        steps = [s for _, s, _ in _losses(store, roles["phase1"].id)]
        assert steps == list(range(1, roles["phase1"].steps + 1))  # each update once, none lost
        assert roles["phase1"].metrics["resumed_from"].endswith("checkpoint-1")


# ----- the command line, with real signals -----------------------------------------------------------
def _wait_for(predicate, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def _spawn(args, db, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "S3GYM_TRAINING_DIR": str(tmp_path / "training"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen([sys.executable, "-m", "s3gym_tui", *args, "--db", str(db)], env=env, cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_loss(db):
    with Store(db) as store:
        for training in store.trainings.list():
            if store.trainings.losses(training.id):
                return training.id
    return None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_s3gym_train_grpo_stops_on_a_signal_and_resumes(tiny_base, tmp_path, sig):
    db = tmp_path / "s.db"
    with Store(db) as store:
        source = _source(store, episodes=2)
    child = _spawn(["train", source.id, "--method", "grpo", "--warm-start", "0", "--reward", "oracle", "--base", str(tiny_base),
                    "--updates", "40", "--generations", "2", "--states-per-update", "1", "--save-every", "20",
                    "--rollout-step-cap", "1", "--completion-tokens", "6", "--eval-episodes", "1", "--step-cap", "1",
                    "--progress", "plain"], db, tmp_path)
    try:
        training_id = _wait_for(lambda: _first_loss(db))
        child.send_signal(sig)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert f"resume with: s3gym resume {training_id}" in err and "stored data is intact" in err
    with Store(db) as store:
        training = store.trainings.get_training(training_id)
        reason = "interrupted (Ctrl-C)" if sig == signal.SIGINT else "terminated (SIGTERM)"
        assert training.status == "interrupted" and training.error.startswith(f"{reason} during GRPO")
        steps = [p.step for p in store.trainings.losses(training_id)]
        assert steps and steps == list(range(1, len(steps) + 1)) and len(steps) < 40
        assert store.trainings.training_checkpoints(training_id) == [] and store.trainings.training_evals(training_id) == []
        trainer_dir = Path(training.directory) / "adapters" / "trainer"
        saved = sorted(int(p.name.split("-")[1]) for p in trainer_dir.glob("checkpoint-*"))
        # the trainer saved the state of the last finished update (the one in progress was dropped)
        assert saved and saved[-1] == steps[-1]
    if sig == signal.SIGINT:  # a second Ctrl-C while resuming is not waited on: it interrupts at once
        child = _spawn(["resume", training_id, "--progress", "plain"], db, tmp_path)
        try:
            _wait_for(lambda: _more_losses(db, training_id, len(steps)))
            child.send_signal(signal.SIGINT)
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == 130, err
        with Store(db) as store:
            assert store.trainings.get_training(training_id).status == "interrupted"
            assert store.trainings.training_evals(training_id) == []


def _more_losses(db, training_id, than):
    with Store(db) as store:
        return len(store.trainings.losses(training_id)) > than


def test_s3gym_train_sft_sigint_then_resume_finishes(tiny_base, tmp_path):
    db = tmp_path / "s.db"
    with Store(db) as store:
        source = _source(store, episodes=2)
    child = _spawn(["train", source.id, "--base", str(tiny_base), "--epochs", "1", "--max-steps", "24",
                    "--max-examples", "4", "--batch-size", "1", "--grad-accum", "1", "--lr", "1e-3",
                    "--eval-episodes", "1", "--step-cap", "1", "--progress", "plain"], db, tmp_path)
    try:
        training_id = _wait_for(lambda: _first_loss(db))
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert f"resume with: s3gym resume {training_id}" in err
    print(f"SFT (tiny model): SIGINT to exit {took:.2f} s")
    with Store(db) as store:
        training = store.trainings.get_training(training_id)
        assert training.status == "interrupted" and store.trainings.training_evals(training_id) == []
        before = [p.step for p in store.trainings.losses(training_id)]
        assert before and before[-1] < 24
    assert main(["resume", training_id, "--db", str(db)]) == 0
    with Store(db) as store:
        training = store.trainings.get_training(training_id)
        assert training.status == "finished" and training.steps == 24
        assert [p.step for p in store.trainings.losses(training_id)] == list(range(1, 25))
        assert store.checkpoints.list(training_id)


def _rank0(launcher_pid: int):
    """The pid of rank 0 among the launcher's children (its RANK=0 environment), once it runs."""
    import glob

    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            text = Path(status).read_text()
            pid = int(status.split("/")[2])
            ppid = int(next(line.split()[1] for line in text.splitlines() if line.startswith("PPid:")))
            if ppid == launcher_pid and b"RANK=0\x00" in Path(f"/proc/{pid}/environ").read_bytes().replace(
                    b"LOCAL_RANK=0\x00", b""):
                return pid
        except (OSError, StopIteration, ValueError):
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds rank 0 through /proc")
def test_under_torchrun_a_stop_of_rank_0_stops_every_rank_at_the_same_update(tiny_base, tmp_path):
    """Data parallel (ranks.py): the stop flag is shared at every step, so no rank waits for another in
    a collective; rank 0 stores the interrupted training and says how to resume, the other rank ends."""
    db = tmp_path / "dp.db"
    with Store(db) as store:
        source = _source(store)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "S3GYM_TRAINING_DIR": str(tmp_path / "training")}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "s3gym_tui",
         "train", source.id, "--base", str(tiny_base), "--batch-size", "1", "--grad-accum", "1", "--max-steps", "30",
         "--max-examples", "4", "--lr", "1e-3", "--eval-episodes", "1", "--step-cap", "1",
         "--no-gradient-checkpointing", "--progress", "plain", "--db", str(db)],
        env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        training_id = _wait_for(lambda: _first_loss(db))
        os.kill(_wait_for(lambda: _rank0(launcher.pid)), signal.SIGINT)
        _, err = launcher.communicate(timeout=300)  # no rank left waiting in a collective
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert f"resume with: s3gym resume {training_id}" in err, err[-3000:]
    with Store(db) as store:
        training = store.trainings.get_training(training_id)
        assert training.status == "interrupted" and training.error.startswith("interrupted (Ctrl-C)")
        steps = [p.step for p in store.trainings.losses(training_id)]
        assert steps == list(range(1, len(steps) + 1)) and len(steps) < 30
        assert store.trainings.training_checkpoints(training_id) == [] and store.trainings.training_evals(training_id) == []
