"""The consolidation matrix from stored evaluations (no torch): every cell is the stored mean at the
checkpoint the row plays, compared with the base on the same game; negative transfer flagged per cell;
`s3gym matrix` shows it; the Training screen's view finds it."""

from __future__ import annotations

import itertools

import pytest
from rich.console import Console

import s3gym_games as games

from s3gym_tui.cli import main
from s3gym_tui.models import Checkpoint, Episode, RunConfig
from s3gym_tui.store import ExpertRef, LossPoint, Study, Training, TrainingCheckpoint
from s3gym_tui.training.evaluate import create_eval_run
from s3gym_tui.training.matrix import study_matrix
from s3gym_tui.training.matrix_view import print_matrix
from s3gym_tui.training.view import training_view

_n = itertools.count()


def _scored(store, run, x, score):
    episode = Episode(id=f"{run.id}-x{x}-{next(_n)}", run_id=run.id, game=run.config.game, mode="eval", phase="eval",
                      seed=run.config.eval_seed(0), index=0, checkpoint=x, model="m", pathway="trained")
    store.episodes.add_episode(episode)
    store.episodes.finish_episode(episode.id, score)
    store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=(episode.id,), scores=(score,)))


def _training(store, tid, games, role="expert", **kw):
    t = store.trainings.add_training(Training(id=tid, games=games, role=role, status="finished", **kw))
    for x in (0, 1):
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=tid, x=x, model=f"trained/{tid}/{x}",
                                                                   adapter=None if x == 0 else f"/a/{tid}/{x}"))
    store.trainings.add_losses(tid, [LossPoint(step=1, loss=2.0, phase=t.method), LossPoint(step=2, loss=1.0, phase=t.method)])
    return t


def build(store):
    """Base: trust 10, snake 4. Experts: trust 14 (snake 3: negative), snake 6 (trust 10: equal).
    Students: phase 1 trust 12 / snake 5, phase 2 trust 9 (negative) / snake 7."""
    templates = {g: store.runs.create_run(RunConfig(model=f"scripted/{g}", game=g, explore_episodes=0, eval_episodes=1))
                 for g in ("trust", "snake")}
    cells, base_cells = {}, {}
    scores = {("e-trust", "trust"): 14, ("e-trust", "snake"): 3, ("e-snake", "snake"): 6, ("e-snake", "trust"): 10,
              ("p1", "trust"): 12, ("p1", "snake"): 5, ("p2", "trust"): 9, ("p2", "snake"): 7}
    base = {"trust": 10, "snake": 4}
    experts = []
    for game in ("trust", "snake"):
        t = _training(store, f"e-{game}", (game,), method="sft")
        experts.append(ExpertRef(training_id=t.id, x=1, game=game, model=f"trained/{t.id}/1"))
    students = [_training(store, "p1", ("trust", "snake"), "phase1", method="distill-off", study_id="st"),
                _training(store, "p2", ("trust", "snake"), "phase2", method="distill-on", study_id="st", parent_id="p1",
                          metrics={"routed": {"trust": 4, "snake": 0}})]
    for training in [store.trainings.get_training(e.training_id) for e in experts] + students:
        for game in ("trust", "snake"):
            own = training.role == "expert" and training.games == (game,)
            run = create_eval_run(store, training, templates[game].config, [0, 1] if own else [1], game=game)
            if own:
                _scored(store, run, 0, base[game])
                base_cells[game] = run.id
            _scored(store, run, 1, scores[(training.id, game)])
            cells[f"{training.id}|{game}"] = run.id
    store.trainings.add_study(Study(id="st", games=("trust", "snake"), experts=tuple(experts),
                                    settings={"cells": cells, "base_cells": base_cells}, status="finished"))
    return cells


def test_cells_deltas_and_negative_transfer(store):
    build(store)
    matrix = study_matrix(store, "st")
    table = {r.label: {g: (c.mean, c.delta, c.negative) for g, c in r.cells.items()} for r in matrix.rows}
    assert list(table) == ["base model", "expert trust (sft, x=1)", "expert snake (sft, x=1)",
                           "student, phase 1 (off-policy)", "student, phase 2 (on-policy)"]
    assert table["base model"] == {"trust": (10, 0.0, False), "snake": (4, 0.0, False)}
    assert table["expert trust (sft, x=1)"] == {"trust": (14, 4, False), "snake": (3, -1, True)}
    assert table["expert snake (sft, x=1)"] == {"trust": (10, 0, False), "snake": (6, 2, False)}
    assert table["student, phase 1 (off-policy)"] == {"trust": (12, 2, False), "snake": (5, 1, False)}
    assert table["student, phase 2 (on-policy)"] == {"trust": (9, -1, True), "snake": (7, 3, False)}
    assert matrix.negative_cells == [("expert trust (sft, x=1)", "snake"), ("student, phase 2 (on-policy)", "trust")]
    # no plain mean across games with different scales: each score on its game's range, then the mean
    (t_lo, t_hi), (s_lo, s_hi) = (games.game_class(g).score_range("eval") for g in ("trust", "snake"))
    expected = ((9 - t_lo) / (t_hi - t_lo) + (7 - s_lo) / (s_hi - s_lo)) / 2
    assert matrix.rows[4].normalised_mean == pytest.approx(expected) and matrix.rows[1].own_game == "trust"
    assert not hasattr(matrix.rows[4], "mean")
    # every cell knows its episodes, step cap and serving path; the base row is served like the others
    for row in matrix.rows:
        for game, cell in row.cells.items():
            assert (cell.episodes, cell.step_cap) == (1, 64)
            assert cell.serving == "transformers (fp32 base + LoRA)"
    assert matrix.column_context == {"trust": "1 ep · cap 64 · transformers (fp32 base + LoRA)",
                                     "snake": "1 ep · cap 64 · transformers (fp32 base + LoRA)"}
    # routing of phase 2, stored with the training, shown next to the matrix; a game without prompts flagged
    assert matrix.rows[4].routed == {"trust": 4, "snake": 0} and matrix.rows[4].unrouted == ("snake",)
    assert matrix.rows[3].routed is None and matrix.rows[3].unrouted == ()
    assert [len(c.points) for c in matrix.losses] == [2, 2, 2, 2]
    console = Console(record=True, width=250)
    print_matrix(console, matrix)
    text = console.export_text()
    assert "9.000 (-1.000)" in text and "negative transfer" in text and "student, phase 2 (on-policy) on trust" in text
    assert "1 ep · cap 64 · transformers (fp32 base + LoRA)" in text and "norm. mean" in text
    assert "min-max over the game's whole score range" in text and "served by transformers" in text
    assert "trust 4 · snake 0" in text
    assert "student, phase 2 (on-policy): no prompt was routed to the expert of snake" in text


def test_s3gym_matrix_and_the_screens_view(tmp_path, capsys):
    from s3gym_tui.store import Store

    db = tmp_path / "m.db"
    with Store(db) as store:
        cells = build(store)
        view = training_view(store, cells["p2|snake"])  # opened on a student's evaluation run
        assert view.source is None and [r.training.id for r in view.trainings] == ["p2"]
        assert [m.study.id for m in view.matrices] == ["st"]
        view = training_view(store, cells["e-trust|trust"])  # an expert's run: its study's matrix too
        assert [m.study.id for m in view.matrices] == ["st"]
    assert main(["matrix", "--db", str(db)]) == 0  # the newest study
    out = capsys.readouterr().out
    assert "study st" in out and "14.000 (+4.000)" in out and "training losses" in out
    assert main(["matrix", "nope", "--db", str(db)]) == 2
    assert "no study 'nope'" in capsys.readouterr().err


def test_a_killed_study_reads_interrupted_and_a_driven_one_its_status(tmp_path, capsys):
    """A study holds its trainings' leases to its end: one that says `training` while none of them is
    alive was killed (interrupted); while this process holds one, it is what it says."""
    from s3gym_tui.store import Store

    db = tmp_path / "m.db"
    with Store(db) as store:
        build(store)
        store.trainings.set_study_status("st", "training")
    assert main(["matrix", "st", "--db", str(db)]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "study st: interrupted"
    with Store(db) as store:
        store.leases.acquire_training_lease("p2", "s3gym distill")
        assert main(["matrix", "st", "--db", str(db)]) == 0
        assert capsys.readouterr().out.rstrip().splitlines()[-1] == "study st: training"
