"""Two-phase consolidation on the tiny base: per-game teacher routing, the study end to end (expert
rollouts -> phase 1 off-policy SFT -> phase 2 on-policy reverse KL -> ablations -> every cell evaluated),
the matrix it stores, Ctrl-C and resume, and the refusals."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, Training, TrainingCheckpoint, audit
from s3gym_tui.training.config import DistillConfig, SftConfig

pytest.importorskip("trl")

TINY = dict(epochs=1, batch_size=2, grad_accum=1, learning_rate=1e-2)
OPTIONS = DistillConfig(rollout_episodes=1, rollout_step_cap=2, epochs=1, batch_size=2, grad_accum=1,
                        phase1_learning_rate=1e-2, updates=2, batch=2, max_completion_length=6, save_every=1,
                        learning_rate=1e-3)


def test_each_row_is_taught_by_its_own_games_expert(tiny_base):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from s3gym_tui.training.onpolicy import adapter_name, routed_hidden

    paths = {}
    for i, game in enumerate(("trust", "snake")):
        torch.manual_seed(10 + i)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_base),
                               LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM"))
        paths[game] = tiny_base.parent / f"expert-{game}"
        model.save_pretrained(paths[game])
    teacher = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base), str(paths["trust"]),
                                        adapter_name=adapter_name("trust"))
    teacher.load_adapter(str(paths["snake"]), adapter_name=adapter_name("snake"))
    teacher.eval()
    ids = torch.randint(0, 1000, (4, 9))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # a left-padded row

    def hidden(model, input_ids, attention_mask, keep):
        return model.base_model.model.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, -keep:]

    names = [adapter_name("snake"), adapter_name("trust")]
    route = torch.tensor([1, 0, 1, 0])  # trust, snake, trust, snake
    with torch.no_grad():
        out = routed_hidden(hidden, teacher, names, route, ids, mask, 4)
        alone = {}
        for game in ("trust", "snake"):
            teacher.set_adapter(adapter_name(game))
            alone[game] = hidden(teacher, ids, mask, 4)
    for row, game in enumerate(("trust", "snake", "trust", "snake")):
        assert torch.allclose(out[row], alone[game][row], atol=1e-6)
    assert not torch.allclose(alone["trust"], alone["snake"])


def _scripted_run(store, game):
    run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none", explore_episodes=1,
                                          eval_every=1, eval_episodes=1, step_cap=3))
    return asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


@pytest.fixture(scope="module")
def experts(tiny_base, tmp_path_factory):
    """A database with two tiny SFT experts (trust, snake), each evaluated on its own game."""
    import os

    from s3gym_tui.training.pipeline import train_from_run

    folder = tmp_path_factory.mktemp("distill")
    old = os.environ.get("S3GYM_TRAINING_DIR")
    os.environ["S3GYM_TRAINING_DIR"] = str(folder / "training")
    db = folder / "d.db"
    ids = {}
    with Store(db) as store:
        for game in ("trust", "snake"):
            source = _scripted_run(store, game)
            options = SftConfig(base=str(tiny_base), max_examples=3, eval_episodes=1, step_cap=1, **TINY)
            ids[game] = asyncio.run(train_from_run(store, source.id, options)).training.id
    yield db, ids, folder
    if old is None:
        os.environ.pop("S3GYM_TRAINING_DIR", None)
    else:
        os.environ["S3GYM_TRAINING_DIR"] = old


def test_the_study_end_to_end(experts, capsys, monkeypatch):
    from s3gym_tui.training.distill import distill, resume_study
    from s3gym_tui.training.matrix import study_matrix

    db, ids, folder = experts
    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(folder / "training"))
    stages = []
    from s3gym_tui.training.distill import DistillHooks

    with Store(db) as store:
        study = asyncio.run(distill(store, [ids["trust"], f"{ids['snake']}:1"],
                                    DistillConfig(**{**OPTIONS.model_dump(), "ablations": True}),
                                    DistillHooks(stage=lambda s, i: stages.append(s))))
        assert study.status == "finished" and study.games == ("trust", "snake")
        assert [e.x for e in study.experts] == [1, 1]
        assert stages[:4] == ["rollouts", "rollouts", "datasets", "datasets"]
        assert {"phase 1", "phase 2", "ablation", "evaluation"} <= set(stages)
        roles = {t.role: t for t in store.trainings.list(study_id=study.id)}
        assert sorted(roles) == ["mixed-sft", "off-only", "on-only", "phase1", "phase2"]
        p1, p2 = roles["phase1"], roles["phase2"]
        assert (p1.method, p2.method, p2.parent_id) == ("distill-off", "distill-on", p1.id)
        assert all(t.status == "finished" and t.games == ("trust", "snake") for t in roles.values())
        last_p1 = max((c for c in store.trainings.training_checkpoints(p1.id) if c.adapter), key=lambda c: c.x)
        assert p2.settings["init_adapter"] == last_p1.adapter and roles["on-only"].settings["init_adapter"] is None
        assert p2.settings["teachers"] == {e.game: e.model for e in study.experts}
        assert p2.metrics["routed"]["trust"] > 0 and p2.metrics["routed"]["snake"] > 0
        budget = p1.steps + OPTIONS.updates
        assert roles["off-only"].steps == roles["on-only"].steps == roles["mixed-sft"].steps == budget
        # phase 1 learnt from the experts' own rollouts: ordinary exploration runs of the expert models
        rollout_runs = study.settings["rollout_runs"]
        for game, run_id in rollout_runs.items():
            run = store.runs.get_run(run_id)
            expert = next(e for e in study.experts if e.game == game)
            assert (run.config.model, run.config.pathway, run.status) == (expert.model, "none", "finished")
            assert store.episodes.list(run_id, phase="eval") == [] and store.episodes.list(run_id, phase="explore")
        datasets = {s.ref for s in store.trainings.training_sources(p1.id, "dataset")}
        assert datasets == set(study.settings["datasets"].values())
        assert {store.datasets.get_dataset(d).run_id for d in datasets} == set(rollout_runs.values())
        prompts = store.trainings.training_sources(p2.id, "prompt")
        assert prompts and all(store.episodes.get_episode(s.ref).run_id in rollout_runs.values() for s in prompts)
        mixed = {store.datasets.get_dataset(s.ref).run_id for s in store.trainings.training_sources(roles["mixed-sft"].id, "dataset")}
        assert mixed == {store.trainings.get_training(i).source_run for i in ids.values()}
        # the matrix: every cell is the stored strict evaluation of that row on that game
        matrix = study_matrix(store, study.id)
        assert matrix.games == ("trust", "snake")
        assert [r.kind for r in matrix.rows] == ["base", "base-grammar", "expert", "expert", "phase1", "phase2",
                                                 "off-only", "on-only", "mixed-sft"]
        for row in matrix.rows:
            for game, cell in row.cells.items():
                run = store.runs.get_run(cell.run_id)
                assert run.config.game == game and run.config.pathway == "trained" and run.status == "finished"
                means = {c.x: c.mean for c in store.checkpoints.list(run.id)}
                assert cell.mean == means[cell.x] and cell.n == 1
                base = matrix.rows[0].cells[game].mean
                assert cell.delta == pytest.approx(cell.mean - base) and cell.negative == (cell.mean < base - 1e-9)
                expert_run = store.runs.get_run(study.settings["base_cells"][game])
                assert run.config.eval_seed_base == expert_run.config.eval_seed_base
        expert_rows = [r for r in matrix.rows if r.kind == "expert"]
        assert [r.own_game for r in expert_rows] == ["trust", "snake"]
        assert matrix.rows[0].cells["trust"].run_id == ids["trust"]  # the base cell: x = 0 of the expert's own run
        assert {c.training_id for c in matrix.losses} == set(ids.values()) | {t.id for t in roles.values()}
        assert audit(store).ok
        episodes = len(store.episodes.list())
        again = asyncio.run(resume_study(store, study.id))  # finished: nothing new
        assert again.status == "finished" and len(store.episodes.list()) == episodes
        cell_run = matrix.rows[5].cells["snake"].run_id
    capsys.readouterr()
    assert main(["matrix", study.id, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    for needle in ("base model", "expert trust", "student, phase 2 (on-policy)", "ablation: mixed multi-task SFT",
                   "training losses"):
        assert needle in out, needle
    assert main(["report", cell_run, "--db", str(db)]) == 0
    assert f"study {study.id}" in capsys.readouterr().out


def test_ctrl_c_in_phase_2_then_resume(experts, monkeypatch, capsys):
    from s3gym_tui.training import backend, onpolicy
    from s3gym_tui.training.distill import distill, resume_study

    db, ids, folder = experts
    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(folder / "training"))
    sft_calls, on_calls = [], []
    real_sft, real_on = backend.train_lora, onpolicy.train_onpolicy

    def sft(*args, **kwargs):
        sft_calls.append(kwargs.get("resume"))
        return real_sft(*args, **kwargs)

    def interrupted(*args, **kwargs):
        on_calls.append(kwargs.get("resume"))
        raise KeyboardInterrupt

    monkeypatch.setattr(backend, "train_lora", sft)
    monkeypatch.setattr(onpolicy, "train_onpolicy", interrupted)
    with Store(db) as store:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(distill(store, list(ids.values()), OPTIONS))
        study = store.trainings.studies(limit=1)[0]
        assert study.status == "interrupted"
        roles = {t.role: t for t in store.trainings.list(study_id=study.id)}
        assert roles["phase1"].status == "evaluating" and roles["phase2"].status == "interrupted"
        assert f"s3gym resume {roles['phase2'].id}" in roles["phase2"].error or "interrupted" in roles["phase2"].error

        def resumed(*args, **kwargs):
            on_calls.append(kwargs.get("resume"))
            return real_on(*args, **kwargs)

        monkeypatch.setattr(onpolicy, "train_onpolicy", resumed)
        study_id = study.id
    capsys.readouterr()
    assert main(["resume", study_id, "--db", str(db)]) == 0  # through the command line
    out = capsys.readouterr().out
    assert f"study {study_id}" in out and "student, phase 2 (on-policy)" in out and "phase 2 updates" in out
    with Store(db) as store:
        assert store.trainings.get_study(study_id).status == "finished"
        assert sft_calls == [False] and on_calls == [False, True]  # phase 1 was not trained again
        assert {t.status for t in store.trainings.list(study_id=study_id)} == {"finished"}
        assert asyncio.run(resume_study(store, study_id)).status == "finished"
        assert on_calls == [False, True]


def test_the_experts_are_checked_first(experts, capsys):
    from s3gym_tui.training.distill import resolve_experts
    from s3gym_tui.training.pipeline import TrainingError

    db, ids, _ = experts
    with Store(db) as store:
        for specs, needle in (([ids["trust"]], "at least two games"), ([ids["trust"], ids["trust"]], "two experts for trust"),
                              ([ids["trust"], "nope"], "no training 'nope'"),
                              ([ids["trust"], f"{ids['snake']}:7"], "no trained checkpoint '7'")):
            with pytest.raises(TrainingError, match=needle):
                resolve_experts(store, specs)
        store.trainings.add_training(Training(id="elsewhere", games=("chess",), base="/some/other/base", status="finished"))
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id="elsewhere", x=1, model="trained/elsewhere/1",
                                                                   adapter="/x"))
        with pytest.raises(TrainingError, match="different base models"):
            resolve_experts(store, [ids["trust"], "elsewhere"])
        studies = len(store.trainings.studies())
    assert main(["distill", ids["trust"], "--db", str(db)]) == 2
    assert "at least two games" in capsys.readouterr().err
    with Store(db) as store:
        assert len(store.trainings.studies()) == studies  # nothing written


def test_an_expert_that_learnt_nothing_cannot_teach(tmp_path, capsys):
    """A GRPO expert none of whose updates had a signal is the base model: the study is refused before
    anything is written (and a resumed older study is refused at phase 2, by the same check)."""
    from s3gym_tui.store import LossPoint

    db = tmp_path / "n.db"
    flat = {"frac_reward_zero_std": 1.0, "reward_std": 0.0, "grad_norm": 0.0, "no_signal": 1.0}
    with Store(db) as store:
        for game, learnt in (("trust", False), ("snake", True)):
            source = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, explore_episodes=1,
                                                     eval_episodes=1))
            store.trainings.add_training(Training(id=f"g-{game}", method="grpo", games=(game,), source_run=source.id,
                                                  base="tiny", status="finished", steps=2))
            for x, step in ((0, 0), (1, 2)):
                store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=f"g-{game}", x=x, step=step,
                                                                           model=f"trained/g-{game}/{x}",
                                                                           adapter=f"/a/{game}/{x}" if x else None))
            store.trainings.add_losses(f"g-{game}", [LossPoint(step=s, loss=0.0, phase="grpo", metrics=flat if not learnt or
                                                               s == 1 else {**flat, "frac_reward_zero_std": 0.5,
                                                                  "no_signal": 0.0}) for s in (1, 2)])
    code = main(["distill", "g-trust", "g-snake", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "g-trust cannot teach: 2 of 2 grpo updates had no signal" in err
    assert "g-snake" not in err  # 1 of its 2 updates had a signal: it learnt something
    with Store(db) as store:
        assert store.trainings.studies() == []
