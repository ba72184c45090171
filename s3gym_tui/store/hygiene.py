"""Run hygiene: removing runs with everything derived from them, and compacting the file."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Sequence

from s3gym_tui.store.connection import PAGE_SIZE
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.credit_schema import remove_credit_of
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.stored_prompt import SHARED_LIKE, SHARED_REF
from s3gym_tui.store.leases import RunBusy, _lease, _SELECT as _SELECT_LEASES

_TEXT_KEY = SHARED_REF

# Episodes to remove with runs: the runs' own, then (transitively) forks made from them and
# standalone episodes whose experience came from them (trials of their summaries, borrows).
_DOOMED_EPISODES = """
WITH RECURSIVE doomed(id) AS (
    SELECT id FROM episodes WHERE run_id IN (SELECT value FROM json_each(:runs))
    UNION
    SELECT e.id FROM episodes e WHERE e.run_id IS NULL AND e.summary_id IN
        (SELECT id FROM summaries WHERE run_id IN (SELECT value FROM json_each(:runs)))
    UNION
    SELECT e.id FROM episodes e WHERE e.run_id IS NULL AND e.experience_run_id IN
        (SELECT value FROM json_each(:runs))
    UNION
    SELECT e.id FROM episodes e JOIN doomed d ON e.fork_of = d.id
)
SELECT id FROM doomed
"""


@dataclass(frozen=True)
class Removal:
    """What removing runs takes with it (counts), and the bytes it frees inside the file."""

    run_ids: tuple[str, ...]
    episodes: int = 0
    forks_and_trials: int = 0
    steps: int = 0
    summaries: int = 0
    checkpoints: int = 0
    datasets: int = 0
    texts: int = 0
    free_bytes: int = 0  # unused pages in the file after the removal (`s3gym vacuum` returns them)

    def describe(self) -> str:
        parts = [f"{len(self.run_ids)} run(s)", f"{self.episodes} episode(s)"]
        if self.forks_and_trials:
            parts.append(f"{self.forks_and_trials} fork(s), summary trial(s) or hand-played episode(s) made "
                         f"from them or their experience")
        parts += [f"{self.steps} step(s)", f"{self.summaries} summary version(s)",
                  f"{self.checkpoints} checkpoint(s)", f"{self.datasets} dataset(s)"]
        return ", ".join(parts)


@dataclass(frozen=True)
class Compaction:
    """The sizes of the database file and of its WAL before and after a vacuum, and whether the WAL
    could be folded back into the file (a reader or writer in another process, a live run, keeps
    the WAL's frames until it lets go: then the file is not smaller yet)."""

    db_before: int
    wal_before: int
    db_after: int
    wal_after: int
    wal_folded: bool = True
    frames_left: int = 0  # WAL frames the checkpoint could not copy back
    page_before: int = 0  # the file's page size before and after (bytes; connection.PAGE_SIZE)
    page_after: int = 0

    @property
    def before_bytes(self) -> int:
        return self.db_before + self.wal_before

    @property
    def after_bytes(self) -> int:
        return self.db_after + self.wal_after

    @property
    def reclaimed(self) -> int:
        return max(0, self.before_bytes - self.after_bytes)


class Hygiene(Repository):
    """rm and vacuum. Deletes a run's rows from every table that holds them (runs, episodes, steps,
    summaries, checkpoints, datasets, annotations, texts, ...); reads the file's size."""

    def _file_bytes(self) -> int:
        return sum(self._sizes())

    def _sizes(self) -> tuple[int, int]:
        """(database file, WAL) in bytes; a missing WAL is 0."""
        sizes = []
        for suffix in ("", "-wal"):
            try:
                sizes.append(os.stat(str(self._db.path) + suffix).st_size)
            except OSError:
                sizes.append(0)
        return sizes[0], sizes[1]

    def removal_plan(self, run_ids: Sequence[str]) -> Removal:
        """What remove_runs(run_ids) would remove (nothing is changed)."""
        with self._db._reading("plan a removal") as conn:
            conn.execute("BEGIN")
            try:
                return self._plan(conn, run_ids)
            finally:
                conn.execute("ROLLBACK")

    def _plan(self, conn, run_ids: Sequence[str]) -> Removal:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            raise StoreError("name at least one run to remove")
        known = {r[0] for r in conn.execute("SELECT id FROM runs WHERE id IN (SELECT value FROM "
                                            "json_each(?))", (json.dumps(ids),))}
        missing = [i for i in ids if i not in known]
        if missing:
            raise StoreError(f"no run {missing[0]!r} (nothing was removed)")
        for row in conn.execute(_SELECT_LEASES + " WHERE run_id IN (SELECT value FROM json_each(?))",
                                (json.dumps(ids),)):
            lease = _lease(row)
            if lease.alive():
                raise RunBusy(f"run {lease.run_id} is being driven by {lease.describe()}: stop it "
                              f"before removing it (nothing was removed)")
        runs = json.dumps(ids)
        episodes = [r[0] for r in conn.execute(_DOOMED_EPISODES, {"runs": runs})]
        eps = json.dumps(episodes)
        outside = conn.execute(
            "SELECT DISTINCT d.id FROM dataset_rows r JOIN datasets d ON d.id = r.dataset_id "
            "WHERE r.episode_id IN (SELECT value FROM json_each(?)) AND (d.run_id IS NULL OR "
            "d.run_id NOT IN (SELECT value FROM json_each(?))) LIMIT 3", (eps, runs)).fetchall()
        if outside:
            raise StoreError(f"dataset {outside[0][0]} of another run trains on these runs' steps: "
                             f"remove that run too, or keep these (nothing was removed)")
        learnt = conn.execute(
            "SELECT t.id FROM trainings t WHERE t.source_run IN (SELECT value FROM json_each(:runs)) "
            "OR t.dataset_id IN (SELECT id FROM datasets WHERE run_id IN (SELECT value FROM json_each(:runs))) "
            "OR EXISTS (SELECT 1 FROM training_sources s WHERE s.training_id = t.id AND ((s.kind = 'dataset' "
            "AND s.ref IN (SELECT id FROM datasets WHERE run_id IN (SELECT value FROM json_each(:runs)))) "
            "OR (s.kind = 'prompt' AND s.ref IN (SELECT value FROM json_each(:eps))))) LIMIT 1",
            {"runs": runs, "eps": eps}).fetchone()
        if learnt:
            raise StoreError(f"training {learnt[0]} learnt from these runs: keep them while the training is "
                             f"kept (nothing was removed)")
        own = conn.execute("SELECT count(*) FROM episodes WHERE run_id IN (SELECT value FROM "
                           "json_each(?))", (runs,)).fetchone()[0]
        count = lambda sql, arg: conn.execute(sql, (arg,)).fetchone()[0]  # noqa: E731
        return Removal(
            run_ids=tuple(ids), episodes=own, forks_and_trials=len(episodes) - own,
            steps=count("SELECT count(*) FROM steps WHERE episode_id IN (SELECT value FROM "
                        "json_each(?))", eps),
            summaries=count("SELECT count(*) FROM summaries WHERE run_id IN (SELECT value FROM "
                            "json_each(?))", runs),
            checkpoints=count("SELECT count(*) FROM checkpoints WHERE run_id IN (SELECT value FROM "
                              "json_each(?))", runs),
            datasets=count("SELECT count(*) FROM datasets WHERE run_id IN (SELECT value FROM "
                           "json_each(?))", runs))

    def remove_runs(self, run_ids: Sequence[str]) -> Removal:
        """Remove runs with their episodes, steps, summaries, checkpoints, datasets, curation log,
        experience states, the forks, summary trials and borrowing episodes made from them, and the
        shared prompt parts nothing else uses. All or nothing, in one transaction; a driven run is
        refused."""
        with self._db._tx("remove runs") as conn:
            plan = self._plan(conn, run_ids)
            runs = json.dumps(list(plan.run_ids))
            episodes = json.dumps([r[0] for r in conn.execute(_DOOMED_EPISODES, {"runs": runs})])
            in_runs = "(SELECT value FROM json_each(?))"
            keys: set[str] = set()
            for (prompt,) in conn.execute(f"SELECT prompt FROM steps WHERE episode_id IN {in_runs} "
                                          f"AND prompt LIKE '{SHARED_LIKE}'", (episodes,)):
                keys.update(_TEXT_KEY.findall(prompt))
            conn.execute(f"DELETE FROM annotations WHERE episode_id IN {in_runs} OR summary_id IN (SELECT id "
                         f"FROM summaries WHERE run_id IN {in_runs})", (episodes, runs))
            conn.execute(f"DELETE FROM dataset_rows WHERE dataset_id IN (SELECT id FROM datasets "
                         f"WHERE run_id IN {in_runs})", (runs,))
            conn.execute(f"DELETE FROM datasets WHERE run_id IN {in_runs}", (runs,))
            conn.execute(f"DELETE FROM step_repairs WHERE episode_id IN {in_runs}", (episodes,))
            remove_credit_of(conn, episodes)
            conn.execute(f"DELETE FROM steps WHERE episode_id IN {in_runs}", (episodes,))
            conn.execute(f"UPDATE episodes SET summary_id = NULL, fork_of = NULL, fork_step = NULL "
                         f"WHERE id IN {in_runs}", (episodes,))
            conn.execute(f"UPDATE summaries SET for_episode_id = NULL WHERE for_episode_id IN {in_runs}",
                         (episodes,))  # a declared foreign key (summaries are removed below)
            conn.execute(f"DELETE FROM episodes WHERE id IN {in_runs}", (episodes,))
            for table in ("summary_actions", "experience_states", "checkpoints", "leases", "training_evals"):
                conn.execute(f"DELETE FROM {table} WHERE run_id IN {in_runs}", (runs,))
            conn.execute(f"DELETE FROM summaries WHERE run_id IN {in_runs}", (runs,))
            conn.execute(f"DELETE FROM runs WHERE id IN {in_runs}", (runs,))
            freed = 0
            if keys:  # one scan of what remains: which of these parts are still referenced
                for (prompt,) in conn.execute(f"SELECT prompt FROM steps WHERE prompt LIKE '{SHARED_LIKE}'"):
                    keys.difference_update(_TEXT_KEY.findall(prompt))
                    if not keys:
                        break
                freed = conn.execute("DELETE FROM texts WHERE key IN (SELECT value FROM "
                                     "json_each(?))", (json.dumps(sorted(keys)),)).rowcount
        free = self._free_bytes()
        return Removal(**{**plan.__dict__, "texts": freed, "free_bytes": free})

    def _free_bytes(self) -> int:
        with self._db._reading("measure free pages") as conn:
            pages = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    def vacuum(self) -> Compaction:
        """Rewrite the file without its free pages and fold the WAL back (readers in other
        processes keep working: in WAL mode VACUUM is an ordinary write transaction)."""
        conn = self._db._live("vacuum the database")
        if self._db.read_only:
            raise StoreError(f"database {self._db.path} is open read-only: cannot vacuum it")
        before = self._sizes()
        try:
            page_before = _pragma(conn, "page_size")
            if page_before != PAGE_SIZE and _vacuum_to_page_size(conn):
                busy, log, done = 0, 0, 0  # rewritten outside WAL mode: nothing waits in the WAL
            else:
                conn.execute("VACUUM")
                busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            page_after = _pragma(conn, "page_size")
        except sqlite3.Error as err:
            raise self._db._wrap(err, "vacuum the database") from err
        left = max(0, log - done) if log >= 0 else 0
        return Compaction(*before, *self._sizes(), wal_folded=not busy and not left, frames_left=left,
                          page_before=page_before, page_after=page_after)

    def file_bytes(self) -> int:
        """The database file plus its WAL, in bytes."""
        return self._file_bytes()


def _vacuum_to_page_size(conn: sqlite3.Connection) -> bool:
    """VACUUM the file into PAGE_SIZE pages (a file made before new files used them), if this
    connection has it alone: the page size changes only outside WAL mode, which needs every other
    connection gone. False, with nothing changed, when another one has the file open."""
    timeout_ms = _pragma(conn, "busy_timeout")
    _pragma(conn, "busy_timeout = 0")  # someone else has it: no waiting, the pages stay
    try:
        mode = _pragma(conn, "journal_mode = DELETE")
    except sqlite3.OperationalError:
        return False
    finally:
        _pragma(conn, f"busy_timeout = {int(timeout_ms)}")
    try:
        if str(mode).lower() != "delete":
            return False
        _pragma(conn, f"page_size = {PAGE_SIZE}")
        conn.execute("VACUUM")
        return True
    finally:
        _pragma(conn, "journal_mode = WAL")


def _pragma(conn: sqlite3.Connection, pragma: str):
    """The first value a PRAGMA answers, its statement run to the end (an unfinished one would hold
    the file: a checkpoint after it fails "table is locked")."""
    rows = conn.execute(f"PRAGMA {pragma}").fetchall()
    return rows[0][0] if rows else None


__all__ = ["Compaction", "Hygiene", "Removal"]
