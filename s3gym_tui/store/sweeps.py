"""Stored sweeps: a sweep row and its runs (runs.sweep_id), created together; progress and spend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, get_args

from pydantic import ValidationError

from s3gym_tui.models import Run, RunConfig, Sweep, SweepConfig
from s3gym_tui.secrets import redact_values, strip_url_credentials
from s3gym_tui.store.connection import Connection, _new_id
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.rows import from_row, one_row, row_dicts
from s3gym_tui.store.runs import Runs, run_from_row

SWEEP_STATUSES: tuple[str, ...] = get_args(Sweep.model_fields["status"].annotation)

_PROGRESS = """
SELECT r.id, r.status, r.config,
       coalesce(sum(e.phase = 'explore' AND e.status = 'finished'), 0),
       coalesce(sum(e.phase = 'eval' AND e.status = 'finished'), 0),
       (SELECT count(*) FROM checkpoints c WHERE c.run_id = r.id),
       coalesce(sum(e.n_steps), 0)
FROM runs r LEFT JOIN episodes e ON e.run_id = r.id
WHERE r.sweep_id = ? GROUP BY r.id ORDER BY r.rowid"""

_STEP_SPEND = """
SELECT coalesce(sum(s.cost), 0), coalesce(sum(s.cost IS NULL), 0), count(*),
       coalesce(sum(s.tokens_in), 0), coalesce(sum(s.tokens_out), 0)
FROM runs r JOIN episodes e ON e.run_id = r.id JOIN steps s ON s.episode_id = e.id
WHERE r.sweep_id = ? AND s.actor = 'model'"""

_STEP_CACHE = """
SELECT e.run_id, sum(s.tokens_cached), sum(s.tokens_in)
FROM episodes e JOIN steps s ON s.episode_id = e.id
WHERE e.run_id IN ({marks}) AND s.actor = 'model' AND s.tokens_cached IS NOT NULL
GROUP BY e.run_id"""

_SUMMARY_SPEND = """
SELECT coalesce(sum(m.cost), 0), coalesce(sum(m.cost IS NULL), 0), count(*),
       coalesce(sum(m.tokens_in), 0), coalesce(sum(m.tokens_out), 0)
FROM runs r JOIN summaries m ON m.run_id = r.id
WHERE r.sweep_id = ? AND m.author LIKE 'model%'"""


@dataclass(frozen=True)
class RunProgress:
    """One run of a sweep as stored now."""

    id: str
    status: str
    config: RunConfig
    explore_done: int  # finished exploration episodes
    eval_done: int  # finished evaluation episodes
    checkpoints_done: int
    steps: int

    @property
    def episodes_done(self) -> int:
        return self.explore_done + self.eval_done

    @property
    def episodes_total(self) -> int:
        cfg = self.config
        return cfg.explore_episodes + len(cfg.checkpoints()) * cfg.eval_episodes


class Sweeps(Repository):
    """Sweeps. Reads and writes `sweeps`; creates its runs through `runs`; reads `runs`, `episodes`,
    `steps`, `summaries` and `checkpoints` (progress and usage)."""

    def __init__(self, db: Connection, runs: Runs) -> None:
        super().__init__(db)
        self._runs = runs

    def _sweep_from_row(self, row: Mapping[str, Any]) -> Sweep:
        return from_row(Sweep, {k: row[k] for k in ("id", "config", "status", "created_at", "note")},
                        f"sweep {row['id']!r}", {"config": None})

    def create_sweep(self, config: SweepConfig, runs: Optional[Sequence[RunConfig]] = None,
                     sweep_id: Optional[str] = None) -> tuple[Sweep, list[Run]]:
        """Store the sweep and all its runs (status 'created') in one transaction."""
        try:
            runs = list(config.run_configs() if runs is None else runs)
        except ValidationError as err:
            raise StoreError(f"invalid sweep: {err.errors()[0].get('msg')}") from err
        sweep = Sweep(id=sweep_id or _new_id("sweep"), config=config)
        created: list[Run] = []
        # credentials inside an api base URL are never stored (as for a run's api base)
        from s3gym_tui.engine.decoding import storable_args

        settings = dict(config.settings)
        if isinstance(settings.get("model_args"), dict):  # provider arguments: never their secrets
            settings["model_args"] = storable_args(settings["model_args"])
        stored = config.model_copy(update={"settings": settings, "api_bases": {
            model: tuple(strip_url_credentials(b) for b in bases) for model, bases in config.api_bases.items()}})
        with self._db._tx("create a sweep") as conn:
            if conn.execute("SELECT 1 FROM sweeps WHERE id = ?", (sweep.id,)).fetchone():
                raise StoreError(f"sweep {sweep.id!r} already exists")
            conn.execute("INSERT INTO sweeps (id, config, status, created_at, note) VALUES (?, ?, ?, ?, ?)",
                         (sweep.id, redact_values(stored.model_dump_json()), sweep.status, sweep.created_at,
                          sweep.note))
            for run_config in runs:
                created.append(self._runs.create_run(run_config, sweep_id=sweep.id))
        return sweep, created

    def find_sweep(self, sweep_id: str) -> Optional[Sweep]:
        with self._db._reading("read a sweep") as conn:
            row = one_row(conn, "SELECT * FROM sweeps WHERE id = ?", (sweep_id,))
        return None if row is None else self._sweep_from_row(row)

    def get_sweep(self, sweep_id: str) -> Sweep:
        sweep = self.find_sweep(sweep_id)
        if sweep is None:
            raise StoreError(f"no sweep {sweep_id!r}")
        return sweep

    def list_sweeps(self, limit: int = 100) -> list[Sweep]:
        """Newest first."""
        with self._db._reading("list sweeps") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM sweeps ORDER BY created_at DESC, rowid DESC "
                                          "LIMIT ?", (int(limit),)))
        return [self._sweep_from_row(r) for r in rows]

    def set_sweep_status(self, sweep_id: str, status: str, note: Optional[str] = None) -> Sweep:
        if status not in SWEEP_STATUSES:
            raise StoreError(f"bad sweep status {status!r}: one of {', '.join(SWEEP_STATUSES)}")
        with self._db._tx("set a sweep's status") as conn:
            sql, params = "UPDATE sweeps SET status = ?", [status]
            if note is not None:
                sql += ", note = ?"
                params.append(note)
            if conn.execute(sql + " WHERE id = ?", (*params, sweep_id)).rowcount == 0:
                raise StoreError(f"no sweep {sweep_id!r}")
        return self.get_sweep(sweep_id)

    def set_sweep_config(self, sweep_id: str, config: SweepConfig) -> Sweep:
        """Change how the sweep runs (budget, concurrency) on resume; its runs are unchanged."""
        with self._db._tx("update a sweep") as conn:
            if conn.execute("UPDATE sweeps SET config = ? WHERE id = ?",
                            (redact_values(config.model_dump_json()), sweep_id)).rowcount == 0:
                raise StoreError(f"no sweep {sweep_id!r}")
        return self.get_sweep(sweep_id)

    def sweep_runs(self, sweep_id: str) -> list[Run]:
        """The sweep's runs in the order they were planned."""
        with self._db._reading("list a sweep's runs") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM runs WHERE sweep_id = ? ORDER BY rowid",
                                          (sweep_id,)))
        return [run_from_row(r) for r in rows]

    def sweep_progress(self, sweep_id: str) -> list[RunProgress]:
        """Per run: status and finished episodes and checkpoints (one indexed query, for live views)."""
        with self._db._reading("read a sweep's progress") as conn:
            rows = conn.execute(_PROGRESS, (sweep_id,)).fetchall()
        out = []
        for run_id, status, config, explore, evaluation, checkpoints, steps in rows:
            try:
                cfg = RunConfig.model_validate_json(config)
            except ValidationError as err:
                raise StoreError(f"stored run {run_id!r} has an invalid config") from err
            out.append(RunProgress(id=run_id, status=status, config=cfg, explore_done=explore,
                                   eval_done=evaluation, checkpoints_done=checkpoints, steps=steps))
        return out

    def sweep_usage(self, sweep_id: str) -> dict[str, float]:
        """What the sweep's stored model calls cost: cost (known prices), unpriced calls, calls,
        tokens in and out (steps and model-written summaries)."""
        with self._db._reading("read a sweep's spend") as conn:
            steps = conn.execute(_STEP_SPEND, (sweep_id,)).fetchone()
            summaries = conn.execute(_SUMMARY_SPEND, (sweep_id,)).fetchone()
        keys = ("cost", "unpriced", "calls", "tokens_in", "tokens_out")
        return {k: a + b for k, a, b in zip(keys, steps, summaries)}

    def cache_usage(self, run_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Per run, (input tokens read from the provider's prompt cache, input tokens of the calls
        whose provider said so), over its model steps; a run none of whose calls said is absent."""
        out: dict[str, tuple[int, int]] = {}
        ids = list(dict.fromkeys(run_ids))
        with self._db._reading("read the runs' prompt-cache usage") as conn:
            for start in range(0, len(ids), 500):  # SQLite's limit on bound parameters
                chunk = ids[start:start + 500]
                sql = _STEP_CACHE.format(marks=", ".join("?" * len(chunk)))
                for run_id, cached, tokens_in in conn.execute(sql, chunk):
                    out[run_id] = (int(cached or 0), int(tokens_in or 0))
        return out
