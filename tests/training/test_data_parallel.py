"""`s3gym train` under `torchrun --nproc_per_node 2` on the CPU (gloo), with the tiny base: rank 0
alone writes the store (one training, one set of loss points, one evaluation per checkpoint), the
other rank trains with it, and the losses and the adapter match the one-process run of the same
global batch (4 examples: 2 per rank x 2 ranks vs 4 in one process)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, audit

pytest.importorskip("peft")
pytest.importorskip("trl")

# float sums in another order (gradients all-reduced across ranks): figures agree to about 1e-6 here
LOSS_TOLERANCE = 1e-4
WEIGHT_TOLERANCE = 1e-4
COMMON = ["--epochs", "2", "--max-examples", "4", "--grad-accum", "1", "--lr", "1e-2", "--eval-episodes", "1",
          "--step-cap", "1", "--no-gradient-checkpointing"]


def _explored(db: Path) -> str:
    async def go() -> str:
        with Store(db) as store:
            run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                                  eval_every=1, eval_episodes=1))
            return (await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()).id

    return asyncio.run(go())


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_TRAINING_DIR": str(tmp_path / "training")}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "s3gym_tui", *args], env=env, capture_output=True, text=True, timeout=600)


def _lora_weights(adapter: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(adapter / "adapter_model.safetensors"))


def test_two_processes_write_the_store_once_and_match_one_process(tmp_path, tiny_base):
    db = tmp_path / "dp.db"
    source = _explored(db)
    launched = _launch(tmp_path, "train", source, "--base", str(tiny_base), "--batch-size", "2", *COMMON,
                       "--progress", "plain", "--db", str(db))
    assert launched.returncode == 0, launched.stderr[-3000:]
    # one process, the same global batch
    assert main(["train", source, "--base", str(tiny_base), "--batch-size", "4", *COMMON, "--db", str(db)]) == 0
    with Store(db) as store:
        two, one = store.trainings.list(source_run=source)  # oldest first: nothing else was stored twice
        assert len(store.datasets.list(source)) == 2 and two.examples == one.examples == 4
        for training in (two, one):
            assert training.status == "finished" and training.steps == 2  # 2 steps: rank 1 took half of each batch
            assert [c.x for c in store.trainings.training_checkpoints(training.id)] == [0, 1, 2]
            evaluation, constrained = store.trainings.training_evals(training.id)  # as written, and under the grammar
            assert constrained[1] == f"{training.id}-grammar"
            episodes = store.episodes.list(evaluation[1])
            assert sorted(e.checkpoint for e in episodes) == [0, 1, 2]  # one evaluation episode per checkpoint
        losses = {t.id: [(p.step, p.loss) for p in store.trainings.losses(t.id)] for t in (two, one)}
        assert [s for s, _ in losses[two.id]] == [s for s, _ in losses[one.id]] == [1, 2]
        for (_, a), (_, b) in zip(losses[two.id], losses[one.id]):
            assert abs(a - b) <= LOSS_TOLERANCE * abs(b), (losses, LOSS_TOLERANCE)
        adapters = {t.id: Path(store.trainings.training_checkpoints(t.id)[-1].adapter) for t in (two, one)}
        assert audit(store).ok
    base = _lora_weights(adapters[one.id])
    other = _lora_weights(adapters[two.id])
    assert base.keys() == other.keys() and base
    moved = max(float(v.abs().max()) for k, v in base.items() if "lora_B" in k)
    assert moved > 1e-3  # LoRA B starts at zero: the adapters were trained
    for key, value in base.items():
        assert float((value - other[key]).abs().max()) <= WEIGHT_TOLERANCE, key


def test_grpo_in_two_processes_writes_the_store_once(tmp_path, tiny_base):
    """GRPO under torchrun: one training, one loss point per update, one rollout row per state the
    updates compared (each update still compares --states-per-update groups: the replies are split
    across the ranks), one evaluation episode per checkpoint."""
    db = tmp_path / "g.db"
    source = _explored(db)
    launched = _launch(tmp_path, "train", source, "--method", "grpo", "--reward", "oracle", "--base", str(tiny_base),
                       "--updates", "2", "--generations", "2", "--states-per-update", "1", "--save-every", "1",
                       "--rollout-step-cap", "1", "--completion-tokens", "6", "--eval-episodes", "1", "--step-cap",
                       "1", "--warm-start", "2", "--warm-start-epochs", "1", "--progress", "plain", "--db", str(db))
    assert launched.returncode == 0, launched.stderr[-3000:]
    with Store(db) as store:
        (training,) = store.trainings.list()
        assert training.status == "finished" and training.steps == 2
        # the warm start too is trained data parallel (2 examples, one per process: one step), stored once
        assert [(p.phase, p.step) for p in store.trainings.losses(training.id)] == [("warm-start", 1), ("grpo", 1), ("grpo", 2)]
        assert [c.x for c in store.trainings.training_checkpoints(training.id)] == [0, 1, 2]
        assert [s.kind for s in store.trainings.training_sources(training.id)] == ["rollout", "rollout"]
        evaluation, constrained = store.trainings.training_evals(training.id)
        assert sorted(e.checkpoint for e in store.episodes.list(evaluation[1])) == [0, 1, 2]
        assert sorted(e.checkpoint for e in store.episodes.list(constrained[1])) == [0, 1, 2]


def test_distill_in_two_processes_writes_the_store_once(tmp_path, tiny_base, monkeypatch):
    """`s3gym distill` under torchrun: one study, phase 1 and phase 2 trained once each (their loss
    points one per update), every student evaluated once per game; the experts' rollouts and the
    datasets made once, by rank 0."""
    from s3gym_tui.training.config import SftConfig
    from s3gym_tui.training.pipeline import train_from_run

    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(tmp_path / "training"))
    db = tmp_path / "d.db"
    experts = []
    with Store(db) as store:
        for game in ("trust", "snake"):
            run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none", explore_episodes=1,
                                                  eval_every=1, eval_episodes=1, step_cap=3))
            run = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
            options = SftConfig(base=str(tiny_base), max_examples=3, eval_episodes=1, step_cap=1, epochs=1,
                                batch_size=2, grad_accum=1, learning_rate=1e-2)
            experts.append(asyncio.run(train_from_run(store, run.id, options)).training.id)
        runs_before = len(store.runs.list_runs())
    launched = _launch(tmp_path, "distill", *experts, "--rollout-episodes", "1", "--rollout-step-cap", "2",
                       "--updates", "2", "--batch", "2", "--completion-tokens", "6", "--eval-episodes", "1",
                       "--step-cap", "1", "--progress", "plain", "--db", str(db))
    assert launched.returncode == 0, launched.stderr[-3000:]
    with Store(db) as store:
        students = [t for t in store.trainings.list() if t.study_id]
        assert sorted(t.role for t in students) == ["phase1", "phase2"]
        for student in students:
            assert student.status == "finished" and len(store.trainings.losses(student.id)) == student.steps > 0
            evaluations = store.trainings.training_evals(student.id)
            assert sorted(game for game, _, _ in evaluations) == ["snake", "trust"]
            assert all(len(store.episodes.list(run_id)) == 1 for _, run_id, _ in evaluations)
        phase2 = next(t for t in students if t.role == "phase2")
        # every rank's rows are counted: 2 updates x 2 prompts per process x 2 processes
        assert sum(phase2.metrics["routed"].values()) == 2 * 2 * 2
        study = store.trainings.get_study(students[0].study_id)
        assert study.status == "finished" and len(study.settings["rollout_runs"]) == 2
        assert len(study.settings["datasets"]) == 2
        for expert in experts:  # the matrix: each expert also on the other game, once (besides its own two)
            assert len(store.trainings.training_evals(expert)) == 3
        # two rollout runs, four student evaluations (two students x two games) and the experts' two
        # evaluations on each other's game: nothing twice
        assert len(store.runs.list_runs()) == runs_before + 2 + 4 + 2


def test_vllm_is_a_guarded_option(tmp_path, capsys, monkeypatch):
    """`--vllm server|colocate` maps to TRL's own vLLM generation; without vLLM installed it is one
    line before anything is stored (vLLM is simulated absent, so this holds on any machine)."""
    import importlib.util

    from trl import GRPOConfig

    from s3gym_tui.training.grpo import vllm_args
    from s3gym_tui.training.config import GrpoConfig

    args = vllm_args(GrpoConfig(vllm="server", vllm_url="http://gpu-box:8000"))
    config = GRPOConfig(output_dir=str(tmp_path / "g"), use_cpu=True, report_to="none", **args)
    assert (config.use_vllm, config.vllm_mode, config.vllm_server_base_url) == (True, "server", "http://gpu-box:8000")
    assert vllm_args(GrpoConfig()) == {}
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    db = tmp_path / "v.db"
    source = _explored(db)
    for extra, needle in ((["--method", "grpo", "--vllm", "colocate"], "--vllm colocate needs vLLM, which is not "
                                                                          "installed"),
                          (["--method", "grpo", "--vllm", "gpu"], "--vllm must be 'server' or 'colocate' (given gpu)"),
                          (["--vllm", "server"], "--vllm applies to grpo, taspo, not sft"),
                          (["--method", "grpo", "--vllm-url", "http://x"], "--vllm-url names the server")):
        assert main(["train", source, *extra, "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err
    with Store(db) as store:
        assert store.trainings.list() == []
