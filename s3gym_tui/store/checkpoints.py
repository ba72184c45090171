"""The checkpoints repository: a run's evaluation at each x (table checkpoints)."""

from __future__ import annotations

import json

from s3gym_tui.models import Checkpoint
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, row_dicts


class Checkpoints(Repository):
    """Checkpoints. Reads and writes `checkpoints`; reads `runs` and `episodes` (its episodes must be
    the run's evaluation episodes)."""

    # ------------------------------------------------------------------ checkpoints

    def add_checkpoint(self, checkpoint: Checkpoint, *, replace: bool = False) -> Checkpoint:
        """Record the evaluation at x; its episodes must be this run's evaluation episodes."""
        cp = checkpoint
        what = f"checkpoint x={cp.x} of run {cp.run_id!r}"
        with self._db._tx(f"add {what}") as conn:
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (cp.run_id,)).fetchone():
                raise StoreError(f"no run {cp.run_id!r}")
            rows = {r[0]: r[1:] for r in conn.execute(
                "SELECT id, run_id, phase FROM episodes WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(cp.episode_ids)),)).fetchall()}
            for episode_id in cp.episode_ids:
                if episode_id not in rows:
                    raise StoreError(f"{what}: no episode {episode_id!r}")
                if rows[episode_id] != (cp.run_id, "eval"):
                    raise StoreError(f"{what}: episode {episode_id!r} is not an evaluation "
                                     f"episode of this run")
            exists = conn.execute("SELECT 1 FROM checkpoints WHERE run_id = ? AND x = ?",
                                  (cp.run_id, cp.x)).fetchone()
            if exists and not replace:
                raise StoreError(f"{what} already exists")
            conn.execute("INSERT OR REPLACE INTO checkpoints (run_id, x, episode_ids, scores) "
                         "VALUES (?, ?, ?, ?)", (cp.run_id, cp.x, json.dumps(list(cp.episode_ids)),
                                                 json.dumps(list(cp.scores))))
        return cp

    def list(self, run_id: str) -> list[Checkpoint]:
        with self._db._reading("list checkpoints") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM checkpoints WHERE run_id = ? ORDER BY x",
                                          (run_id,)))
        return [from_row(Checkpoint, {k: r[k] for k in ("run_id", "x", "episode_ids", "scores")},
                         f"checkpoint x={r['x']} of run {run_id!r}", {"episode_ids": None, "scores": None})
                for r in rows]

