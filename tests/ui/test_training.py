"""Training screen: a run's datasets (kept / corrected / dropped rows with self-score and verifier
reward, the selection's precision) and a stored training run's checkpoint curve with negative transfer."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from s3gym_tui.app import S3GymApp
from s3gym_tui.models import Checkpoint, Episode
from s3gym_tui.screens.analysis_common import fmt, fmt_score, fmt_signed
from s3gym_tui.screens.training import TrainingScreen
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.store import LossPoint, Store, Training, TrainingCheckpoint
from s3gym_tui.training.dataset import build_dataset
from s3gym_tui.training.evaluate import create_eval_run
from s3gym_tui.widgets.checkpoint_plot import Curve, CurvePlot

MEANS = {0: 10.0, 1: 4.0, 2: 12.0}  # epoch 1 falls below the base: negative transfer


def stored_training(store, source_id: str, dataset_id: str):
    """A training run with its checkpoints written directly (no model needed for the UI)."""
    source = store.runs.get_run(source_id)
    training = store.trainings.add_training(Training(id=f"trust-sft-ui-{source_id[-6:]}", games=("trust",), source_run=source_id,
                                                     dataset_id=dataset_id, base="tiny", epochs=2, examples=5))
    models = {x: f"trained/t-ui/{x}" for x in MEANS}
    for x, model in models.items():
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x, model=model))
    store.trainings.add_losses(training.id, [LossPoint(step=i, loss=3.0 - i, phase="sft") for i in (1, 2)])
    run = create_eval_run(store, training, source.config, list(MEANS), eval_episodes=1, run_id=training.id)
    for x, mean in MEANS.items():
        episode = Episode(id=f"{run.id}-c{x}", run_id=run.id, game="trust", mode="eval", phase="eval",
                          seed=run.config.eval_seed(0), index=0, checkpoint=x, model=models[x],
                          pathway="trained")
        store.episodes.add_episode(episode)
        store.episodes.finish_episode(episode.id, mean)
        store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=(episode.id,), scores=(mean,)))
    store.runs.set_run_status(run.id, "finished")
    return run


def table_rows(screen, selector) -> dict[str, list[str]]:
    """Every cell of every row, the columns a narrow terminal leaves out included (FitTable keeps them)."""
    table = screen.query_one(selector, DataTable)
    keys = [table.coordinate_to_cell_key((i, 0)).row_key for i in range(table.row_count)]
    if isinstance(table, FitTable):
        return {key.value: [str(c) for c in table.full_row(key)] for key in keys}
    return {key.value: [str(c) for c in table.get_row_at(i)] for i, key in enumerate(keys)}


async def open_training(app, pilot, run_id) -> TrainingScreen:
    app.open_training(run_id)
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert isinstance(app.screen, TrainingScreen)
    return app.screen


async def test_datasets_rows_precision_and_the_checkpoint_curve(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-history"]
    with Store(path) as store:
        corrected = await build_dataset(store, run_id, threshold=1.5, correction="reference")
        plain = await build_dataset(store, run_id, threshold=1.5)
        training = stored_training(store, run_id, corrected.dataset.id)
        rows = store.datasets.dataset_rows(corrected.dataset.id)
        steps = {(e.id, s.index): s for e in store.episodes.list(run_id, phase="explore") for s in store.episodes.steps(e.id)}
    counts = corrected.dataset.counts
    assert counts["kept"] > 0 and counts["corrected"] > 0 and counts["dropped"] == 0
    assert plain.dataset.counts["dropped"] == counts["corrected"]

    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_training(app, pilot, run_id)
        shown = table_rows(screen, "#training-rows")
        assert list(shown) == [f"{r.episode_id}#{r.step_index}" for r in rows]
        for row in rows:
            step = steps[(row.episode_id, row.step_index)]
            cells = shown[f"{row.episode_id}#{row.step_index}"]
            assert cells[1:4] == [str(row.step_index), row.kind, step.action]
            assert cells[5:7] == [fmt_score(step.self_score), fmt_score(step.reward)]
            assert (cells[4] != "") == (row.kind == "corrected")
        info = str(screen.query_one("#training-dataset", Static).render())
        q = corrected.quality
        assert f"precision {fmt(q.precision)} ({q.kept_positive}/{q.kept}" in info
        assert f"recall {fmt(q.recall)}" in info and "correction reference" in info

        checkpoints = table_rows(screen, "#training-checkpoints")
        assert list(checkpoints) == [f"{training.id}:{x}" for x in MEANS]
        assert checkpoints[f"{training.id}:1"][2:5] == ["4.00", "-6.00", "negative"]  # the app's one number format
        # no replies stored, no repaired evaluation, no evaluation under the grammar: the gain is not split
        assert checkpoints[f"{training.id}:1"][5:] == ["—", "—", "—", "—", "not split"]
        assert checkpoints[f"{training.id}:2"][4] == ""
        assert screen.query_one("#training-curve", CurvePlot).curves == (Curve(training.id, tuple(MEANS.items())),)
        assert screen.query_one("#training-loss", CurvePlot).curves == (Curve(f"{training.id} sft", ((1, 2.0), (2, 1.0))),)
        flags = str(screen.query_one("#training-flags", Static).render())
        assert "negative transfer at epoch 1" in flags and "Avg 8.67" in flags and "sft ·" in flags

        await pilot.press("d")
        await pilot.pause()
        kinds = {cells[2] for cells in table_rows(screen, "#training-rows").values()}
        assert kinds == {"kept", "dropped"}
        assert "Dataset 2/2" in str(screen.query_one("#training-dataset").border_title)


async def test_opened_on_a_training_run_or_a_run_without_data(demo_db, settings):
    path, ids = demo_db
    with Store(path) as store:
        build = await build_dataset(store, ids["trust-summary"])
        training = stored_training(store, ids["trust-summary"], build.dataset.id)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_training(app, pilot, training.id)
        status = str(screen.query_one("#training-status", Static).render())
        assert ids["trust-summary"] in status and f"opened from training run {training.id}" in status
        assert screen.query_one("#training-rows", DataTable).row_count == build.quality.steps
        await pilot.press("escape")
        screen = await open_training(app, pilot, ids["snake-summary"])
        assert "No dataset for this run yet" in str(screen.query_one("#training-dataset", Static).render())
        assert screen.query_one("#training-checkpoints", DataTable).row_count == 0
        await pilot.press("escape")
        screen = await open_training(app, pilot, "no-such-run")
        assert "no-such-run" in str(screen.query_one("#training-status", Static).render())


async def test_a_training_that_cannot_learn_and_a_killed_one_say_so(demo_db, settings):
    """Updates without signal (every GRPO group with zero reward variance) are stored, counted and shown;
    a training that says 'evaluating' with no live driver shows as interrupted, a driven one with its PID."""
    path, ids = demo_db
    with Store(path) as store:
        build = await build_dataset(store, ids["trust-summary"])
        run = stored_training(store, ids["trust-summary"], build.dataset.id)
        tid = run.id
        store.trainings.update_training(tid, method="grpo", status="evaluating",
                                        settings={"grpo": {"level": "episode", "sampling": "mixed", "format_weight": 1.0,
                                                 "warm_start": 16, "warm_start_epochs": 2}},
                                        metrics={"warm_start_examples": 15, "warm_start_first_loss": 1.618,
                                       "warm_start_last_loss": 0.239})
        flat = {"frac_reward_zero_std": 1.0, "reward_std": 0.0, "grad_norm": 0.0, "parsed_replies": 0.0,
                "no_signal": 1.0}
        store.trainings.add_losses(tid, [LossPoint(step=i, loss=0.0, phase="grpo", metrics=flat) for i in (1, 2)]
                                   + [LossPoint(step=3, loss=0.1, phase="grpo",
                                      metrics={**flat, "frac_reward_zero_std": 0.5, "no_signal": 0.0})])
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await open_training(app, pilot, tid)
        flags = str(screen.query_one("#training-flags", Static).render())
        assert "2 of 3 grpo updates had no signal" in flags
        assert ("episode level · sampling mixed at T 1, G 4 · beta 0, dapo loss · format weight 1 · warm start 15 "
                "examples x 2, loss 1.62 → 0.24" in " ".join(flags.split()))  # the examples it found, not the 16 asked
        assert f"{tid}: interrupted ·" in flags  # nobody drives it: not 'evaluating' forever
    with Store(path) as store:
        lease = store.leases.acquire_training_lease(tid, "test")
        try:
            app = S3GymApp(db_path=path, settings=settings)
            async with app.run_test(size=(160, 45)) as pilot:
                screen = await open_training(app, pilot, tid)
                flags = str(screen.query_one("#training-flags", Static).render())
                assert f"{tid}: evaluating · PID " in flags
        finally:
            store.leases.release_lease(lease)


def stored_study(store) -> dict[str, str]:
    """A two-game study with its evaluations written directly: base trust 10 / snake 4; the expert for trust
    scores 3 on snake (negative transfer); the phase-2 student 12 / 5."""
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import ExpertRef, Study

    templates = {g: store.runs.create_run(RunConfig(model=f"scripted/{g}", game=g, explore_episodes=0, eval_episodes=1))
                 for g in ("trust", "snake")}
    scores = {("ui-e-trust", "trust"): 14, ("ui-e-trust", "snake"): 3, ("ui-e-snake", "snake"): 6,
              ("ui-e-snake", "trust"): 10, ("ui-p2", "trust"): 12, ("ui-p2", "snake"): 5}
    base = {"trust": 10, "snake": 4}
    cells, base_cells, experts = {}, {}, []
    for tid, games, role in (("ui-e-trust", ("trust",), "expert"), ("ui-e-snake", ("snake",), "expert"),
                             ("ui-p2", ("trust", "snake"), "phase2")):
        store.trainings.add_training(Training(id=tid, games=games, role=role, study_id=None if role == "expert" else "ui-st",
                                              method="sft" if role == "expert" else "distill-on", status="finished"))
        for x in (0, 1):
            store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=tid, x=x, model=f"trained/{tid}/{x}"))
        store.trainings.add_losses(tid, [LossPoint(step=1, loss=1.5, phase="distill-on")])
        if role == "expert":
            experts.append(ExpertRef(training_id=tid, x=1, game=games[0], model=f"trained/{tid}/1"))
        for game in ("trust", "snake"):
            own = games == (game,)
            run = create_eval_run(store, store.trainings.get_training(tid), templates[game].config, [0, 1] if own else [1],
                                  game=game)
            for x, score in ([(0, base[game])] if own else []) + [(1, scores[(tid, game)])]:
                episode = Episode(id=f"{run.id}-c{x}", run_id=run.id, game=game, mode="eval", phase="eval",
                                  seed=run.config.eval_seed(0), index=0, checkpoint=x, model="m", pathway="trained")
                store.episodes.add_episode(episode)
                store.episodes.finish_episode(episode.id, score)
                store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=(episode.id,), scores=(score,)))
            store.runs.set_run_status(run.id, "finished")
            cells[f"{tid}|{game}"] = run.id
            if own:
                base_cells[game] = run.id
    store.trainings.add_study(Study(id="ui-st", games=("trust", "snake"), experts=tuple(experts),
                                    settings={"cells": cells, "base_cells": base_cells}, status="finished"))
    return cells


async def test_the_consolidation_matrix_and_loss_curves_of_a_student(demo_db, settings):
    path, _ = demo_db
    with Store(path) as store:
        cells = stored_study(store)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_training(app, pilot, cells["ui-p2|snake"])
        status = str(screen.query_one("#training-status", Static).render())
        assert "a distillation student" in status
        matrix = table_rows(screen, "#training-matrix")
        assert list(matrix) == ["base", "ui-e-trust", "ui-e-snake", "ui-p2"]
        assert matrix["base"][1:3] == [fmt(10.0), fmt(4.0)]
        assert matrix["ui-e-trust"][1:3] == [f"{fmt(14.0)} ({fmt_signed(4.0)})", f"{fmt(3.0)} ({fmt_signed(-1.0)})"]
        assert matrix["ui-p2"][1:3] == [f"{fmt(12.0)} ({fmt_signed(2.0)})", f"{fmt(5.0)} ({fmt_signed(1.0)})"]
        table = screen.query_one("#training-matrix", DataTable)
        styles = {str(table.get_row("ui-e-trust")[2].style), str(table.get_row("ui-p2")[2].style)}
        assert "bold red" in styles  # the expert's negative transfer on snake
        assert "ui-st" in str(table.border_title)
        assert matrix["ui-p2"][3:] == [fmt(screen.view.matrices[0].rows[-1].normalised_mean), ""]
        context = str(screen.query_one("#training-matrix-context", Static).render())
        assert context.startswith("base model: trust 1 ep · cap 64 · transformers")  # the highlighted row's cells
        table.focus()
        table.move_cursor(row=3)
        await pilot.pause()
        context = str(screen.query_one("#training-matrix-context", Static).render())
        assert "student, phase 2" in context and "snake 1 ep · cap 64 · transformers (fp32 base + LoRA)" in context
        assert screen.query_one("#training-loss", CurvePlot).curves == (Curve("ui-p2 distill-on", ((1, 1.5),)),)
