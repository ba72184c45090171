"""Trainings in the store: the training itself, its checkpoints, losses, evaluation runs and the data it
learnt from (held-out guard: no evaluation episode, seed or mode may be a training source), and
distillation studies."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Mapping, Optional, Sequence

from s3gym_tui.models import EVAL_SEED_BASE, utcnow
from s3gym_tui.store.errors import LeakageError, StoreError
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, one_row, row_dicts
from s3gym_tui.store.records import (TRAINING_STATUSES, LossPoint, Study, Training,
                                     TrainingCheckpoint, TrainingSource)

_JSON_FIELDS = ("games", "settings", "metrics")
_TRAINING_COLS = tuple(Training.model_fields)


def _training_values(training: Training) -> tuple:
    data = training.model_dump()
    for key in _JSON_FIELDS:
        data[key] = json.dumps(list(data[key]) if key == "games" else data[key])
    return tuple(data[c] for c in _TRAINING_COLS)


class Trainings(Repository):
    """Trainings, their checkpoints / losses / evaluation runs / sources / repairs, and studies. Reads and
    writes `trainings`, `training_checkpoints`, `training_losses`, `training_evals`, `training_sources`,
    `studies`; reads `step_repairs`, `runs`, `episodes`, `steps`, `datasets` (the held-out guard)."""

    # ------------------------------------------------------------------ trainings

    def _training_from_row(self, row: Mapping[str, Any]) -> Training:
        return from_row(Training, row, f"training {row['id']!r}",
                        {key: "[]" if key == "games" else "{}" for key in _JSON_FIELDS})

    def add_training(self, training: Training) -> Training:
        cols = ", ".join(f'"{c}"' for c in _TRAINING_COLS)
        marks = ", ".join("?" for _ in _TRAINING_COLS)
        with self._db._tx(f"add training {training.id!r}") as conn:
            try:
                conn.execute(f"INSERT INTO trainings ({cols}) VALUES ({marks})", _training_values(training))
            except sqlite3.IntegrityError as err:
                raise StoreError(f"training {training.id!r} already exists") from err
        return training

    def find_training(self, training_id: str) -> Optional[Training]:
        with self._db._reading("read a training") as conn:
            row = one_row(conn, "SELECT * FROM trainings WHERE id = ?", (training_id,))
        return None if row is None else self._training_from_row(row)

    def get_training(self, training_id: str) -> Training:
        training = self.find_training(training_id)
        if training is None:
            raise StoreError(f"no training {training_id!r}")
        return training

    def update_training(self, training_id: str, **fields: Any) -> Training:
        """Change some fields (validated as a Training); status 'finished' also stamps finished_at."""
        current = self.get_training(training_id)
        if "status" in fields and fields["status"] not in TRAINING_STATUSES:
            raise StoreError(f"bad training status {fields['status']!r}: one of {', '.join(TRAINING_STATUSES)}")
        if fields.get("status") == "finished" and "finished_at" not in fields:
            fields["finished_at"] = utcnow()
        updated = Training.model_validate({**current.model_dump(), **fields})
        values = dict(zip(_TRAINING_COLS, _training_values(updated)))
        sets = ", ".join(f'"{c}" = ?' for c in fields)
        with self._db._tx(f"update training {training_id!r}") as conn:
            conn.execute(f"UPDATE trainings SET {sets} WHERE id = ?", [values[c] for c in fields] + [training_id])
        return updated

    def list(self, *, source_run: Optional[str] = None, study_id: Optional[str] = None,
             role: Optional[str] = None, limit: int = 10_000) -> list[Training]:
        """Trainings oldest first, filtered by source run, study and role."""
        where, params = [], []
        for col, value in (("source_run", source_run), ("study_id", study_id), ("role", role)):
            if value is not None:
                where.append(f"{col} = ?")
                params.append(value)
        sql = "SELECT * FROM trainings" + (" WHERE " + " AND ".join(where) if where else "")
        with self._db._reading("list trainings") as conn:
            rows = row_dicts(conn.execute(sql + " ORDER BY created_at, rowid LIMIT ?", [*params, int(limit)]))
        return [self._training_from_row(r) for r in rows]

    # ------------------------------------------------------------------ checkpoints and losses

    def set_training_checkpoint(self, checkpoint: TrainingCheckpoint) -> TrainingCheckpoint:
        cp = checkpoint
        with self._db._tx(f"record checkpoint {cp.x} of training {cp.training_id!r}") as conn:
            self._require_training(conn, cp.training_id)
            conn.execute("INSERT OR REPLACE INTO training_checkpoints (training_id, x, model, adapter, step, repaired) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (cp.training_id, cp.x, cp.model, cp.adapter, cp.step, cp.repaired))
        return cp

    def training_checkpoints(self, training_id: str) -> list[TrainingCheckpoint]:
        with self._db._reading("list training checkpoints") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM training_checkpoints WHERE training_id = ? ORDER BY x",
                                          (training_id,)))
        return [from_row(TrainingCheckpoint, r, f"checkpoint {r['x']} of {training_id!r}") for r in rows]

    def add_losses(self, training_id: str, points: Iterable[LossPoint]) -> int:
        """Record loss points (a point logged again at the same phase and step replaces the old one)."""
        points = list(points)
        with self._db._tx(f"record losses of training {training_id!r}") as conn:
            self._require_training(conn, training_id)
            conn.executemany("INSERT OR REPLACE INTO training_losses (training_id, phase, step, epoch, loss, metrics) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             [(training_id, p.phase, p.step, p.epoch, p.loss, json.dumps(p.metrics)) for p in points])
        return len(points)

    def losses(self, training_id: str, phase: Optional[str] = None) -> list[LossPoint]:
        sql = "SELECT phase, step, epoch, loss, metrics FROM training_losses WHERE training_id = ?"
        params: list[Any] = [training_id]
        if phase is not None:
            sql += " AND phase = ?"
            params.append(phase)
        with self._db._reading("read losses") as conn:
            rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
        return [from_row(LossPoint, dict(zip(("phase", "step", "epoch", "loss", "metrics"), r)),
                         f"loss of training {training_id!r}", {"metrics": "{}"}) for r in rows]

    # ------------------------------------------------------------------ evaluation runs

    def add_training_eval(self, training_id: str, game: str, run_id: str, xs: Sequence[int] = ()) -> None:
        """Link an evaluation run to the training: it plays checkpoints `xs` on `game` (all if empty)."""
        with self._db._tx(f"link evaluation run {run_id!r} to training {training_id!r}") as conn:
            self._require_training(conn, training_id)
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise StoreError(f"no run {run_id!r}")
            conn.execute("INSERT OR IGNORE INTO training_evals (training_id, game, run_id, xs) VALUES (?, ?, ?, ?)",
                         (training_id, game, run_id, json.dumps(sorted(int(x) for x in xs))))

    def training_evals(self, training_id: str) -> list[tuple[str, str, tuple[int, ...]]]:
        """(game, run id, checkpoints it plays: () = all) of every evaluation run, oldest first."""
        with self._db._reading("list evaluation runs") as conn:
            return [(r[0], r[1], tuple(json.loads(r[2] or "[]"))) for r in conn.execute(
                "SELECT game, run_id, xs FROM training_evals WHERE training_id = ? ORDER BY rowid", (training_id,))]

    def training_of_run(self, run_id: str) -> Optional[tuple[Training, str, tuple[int, ...]]]:
        """The training a run evaluates, the game and the checkpoints it plays (() = all), or None."""
        with self._db._reading("find a run's training") as conn:
            row = conn.execute("SELECT training_id, game, xs FROM training_evals WHERE run_id = ? ORDER BY rowid "
                               "LIMIT 1", (run_id,)).fetchone()
        if row is None:
            return None
        return self.get_training(row[0]), row[1], tuple(json.loads(row[2] or "[]"))

    # ------------------------------------------------------------------ sources (held-out guard)

    def add_training_sources(self, training_id: str, sources: Sequence[TrainingSource]) -> int:
        """Record what a training learnt from; evaluation episodes, seeds and modes are refused."""
        user = f"training {training_id!r}"
        with self._db._tx(f"record the sources of {user}") as conn:
            self._require_training(conn, training_id)
            episodes = [s.ref for s in sources if s.kind == "prompt" and s.ref]
            self._db._require_experience(conn, episodes, "training prompt", user)
            for s in sources:
                if s.seed is not None and s.seed >= EVAL_SEED_BASE:
                    raise LeakageError(f"{user}: seed {s.seed} is an evaluation seed and cannot be a "
                                       f"{s.kind} source (held-out data never becomes training data)")
                if s.mode == "eval":
                    raise LeakageError(f"{user}: {s.kind} sources are played in explore mode, never in eval mode")
                if s.kind == "dataset" and not conn.execute("SELECT 1 FROM datasets WHERE id = ?",
                                                            (s.ref,)).fetchone():
                    raise StoreError(f"{user}: no dataset {s.ref!r}")
            conn.executemany("INSERT INTO training_sources (training_id, kind, ref, game, seed, mode, n) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(training_id, s.kind, s.ref, s.game, s.seed, s.mode, s.n) for s in sources])
        return len(sources)

    def training_sources(self, training_id: str, kind: Optional[str] = None) -> list[TrainingSource]:
        sql = "SELECT kind, ref, game, seed, mode, n FROM training_sources WHERE training_id = ?"
        params: list[Any] = [training_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        with self._db._reading("read training sources") as conn:
            rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
        return [from_row(TrainingSource, dict(zip(("kind", "ref", "game", "seed", "mode", "n"), r)),
                         f"source of training {training_id!r}") for r in rows]

    def _require_training(self, conn: sqlite3.Connection, training_id: str) -> None:
        if not conn.execute("SELECT 1 FROM trainings WHERE id = ?", (training_id,)).fetchone():
            raise StoreError(f"no training {training_id!r}")

    # ------------------------------------------------------------------ repaired replies

    def step_repairs(self, episode_id: str) -> dict[int, tuple[str, str]]:
        """step index -> (the model's own reply, the repaired reply the game acted on), for the steps
        of the episode whose reply the provider repaired (asked for with --repair)."""
        with self._db._reading("read repaired replies") as conn:
            rows = conn.execute('SELECT "index", original_reply, repaired_reply FROM step_repairs WHERE '
                                'episode_id = ? ORDER BY "index"', (episode_id,)).fetchall()
        return {int(r[0]): (r[1], r[2]) for r in rows}

    def repair_counts(self, run_id: str) -> dict[int, tuple[int, int]]:
        """checkpoint x -> (steps whose reply was repaired, steps) over the run's evaluation
        episodes: read from the store, so a resumed or repeated evaluation counts the same."""
        with self._db._reading("count repaired replies") as conn:
            rows = conn.execute(
                'SELECT e.checkpoint, count(*), count(r.episode_id) FROM episodes e '
                'JOIN steps s ON s.episode_id = e.id '
                'LEFT JOIN step_repairs r ON r.episode_id = s.episode_id AND r."index" = s."index" '
                "WHERE e.run_id = ? AND e.phase = 'eval' AND e.checkpoint IS NOT NULL GROUP BY e.checkpoint",
                (run_id,)).fetchall()
        return {int(r[0]): (int(r[2]), int(r[1])) for r in rows}

    # ------------------------------------------------------------------ studies

    def add_study(self, study: Study) -> Study:
        with self._db._tx(f"add study {study.id!r}") as conn:
            try:
                conn.execute("INSERT INTO studies (id, games, experts, settings, status, created_at) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             (study.id, json.dumps(list(study.games)),
                              json.dumps([e.model_dump() for e in study.experts]), json.dumps(study.settings),
                              study.status, study.created_at))
            except sqlite3.IntegrityError as err:
                raise StoreError(f"study {study.id!r} already exists") from err
        return study

    def _study_from_row(self, row: Mapping[str, Any]) -> Study:
        return from_row(Study, row, f"study {row['id']!r}", {"games": None, "experts": None, "settings": "{}"})

    def find_study(self, study_id: str) -> Optional[Study]:
        with self._db._reading("read a study") as conn:
            row = one_row(conn, "SELECT * FROM studies WHERE id = ?", (study_id,))
        return None if row is None else self._study_from_row(row)

    def get_study(self, study_id: str) -> Study:
        study = self.find_study(study_id)
        if study is None:
            raise StoreError(f"no study {study_id!r}")
        return study

    def studies(self, limit: int = 1000) -> list[Study]:
        """Studies newest first."""
        with self._db._reading("list studies") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM studies ORDER BY created_at DESC, rowid DESC LIMIT ?",
                                          (int(limit),)))
        return [self._study_from_row(r) for r in rows]

    def set_study_status(self, study_id: str, status: str) -> Study:
        if status not in TRAINING_STATUSES:
            raise StoreError(f"bad study status {status!r}: one of {', '.join(TRAINING_STATUSES)}")
        with self._db._tx(f"set the status of study {study_id!r}") as conn:
            if conn.execute("UPDATE studies SET status = ? WHERE id = ?", (status, study_id)).rowcount == 0:
                raise StoreError(f"no study {study_id!r}")
        return self.get_study(study_id)

    def set_study_settings(self, study_id: str, settings: Mapping[str, Any]) -> Study:
        """Replace a study's settings (its options and the runs and datasets it made so far)."""
        with self._db._tx(f"update study {study_id!r}") as conn:
            if conn.execute("UPDATE studies SET settings = ? WHERE id = ?",
                            (json.dumps(dict(settings)), study_id)).rowcount == 0:
                raise StoreError(f"no study {study_id!r}")
        return self.get_study(study_id)
