"""The summaries repository: versioned summaries (veto, pin, human edits), the curation log and
the experience states (tables summaries, summary_actions, experience_states)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal, Mapping, Optional, Sequence, get_args

from s3gym_tui.authors import author_problem, model_author
from s3gym_tui.models import Summary, is_explore_episode_id, summary_in_use, utcnow
from s3gym_tui.secrets import redact_values
from s3gym_tui.store.connection import _insert_sql, _is_eval, _new_id, _q
from s3gym_tui.store.errors import LeakageError, StoreError
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, one_row, row_dicts

SUMMARY_STATUSES: tuple[str, ...] = get_args(Summary.model_fields["status"].annotation)
_SUMMARY_COLS = tuple(Summary.model_fields)
_INSERT_SUMMARY = _insert_sql("summaries", _SUMMARY_COLS)
_SELECT_SUMMARY = f"SELECT {', '.join(_q(c) for c in _SUMMARY_COLS)} FROM summaries"
MAX_EDIT_SECTION_CHARS = 20_000  # a human edit's section (the summary goes into every prompt)


class Summaries(Repository):
    """Summaries. Reads and writes `summaries`, `summary_actions`, `experience_states`; reads `runs`
    and `episodes` (sources must be exploration data; the episode a summary is written for)."""

    # ------------------------------------------------------------------ summaries

    def _summary_from_row(self, row: Mapping[str, Any]) -> Summary:
        return from_row(Summary, row, f"summary {row['id']!r}", {"source_episode_ids": "[]"})

    def _insert_summary(self, conn: sqlite3.Connection, summary: Summary) -> None:
        data = summary.model_dump()
        data["source_episode_ids"] = json.dumps(list(summary.source_episode_ids))
        conn.execute(_INSERT_SUMMARY, tuple(data[c] for c in _SUMMARY_COLS))

    def add_summary(self, run_id: str, retain: str, avoid: str, next: str, *,
                    source_episode_ids: Sequence[str] = (), author: Optional[str] = None,
                    for_episode_id: Optional[str] = None, parent_version: Optional[int] = None,
                    summary_id: Optional[str] = None, game: Optional[str] = None,
                    for_state_x: Optional[int] = None, tokens_in: int = 0, tokens_out: int = 0,
                    cost: Optional[float] = None) -> Summary:
        """Store the run's next summary version (1, 2, ...), refusing evaluation sources.
        `for_state_x`: the model wrote it for that begun experience state, which now uses it.
        Tokens and cost are those of its model call. `author`: 'model:<model>' or 'human:<name>'
        (default: the run's model).

        Sources must be stored exploration episodes. `for_episode_id` names the stored
        exploration episode whose step 0 it is written for (a declared foreign key: store the
        episode first, see Episodes.add_episode_with_summary); it must not be an evaluation
        episode, now or later.
        `game` defaults to the run's game (and must match it if given)."""
        sources = tuple(source_episode_ids)
        retain, avoid, next = (redact_values(t) for t in (retain, avoid, next))
        with self._db._tx(f"add a summary to run {run_id!r}") as conn:
            run = conn.execute("SELECT game, json_extract(config, '$.model') FROM runs WHERE id = ?",
                               (run_id,)).fetchone()
            if run is None:
                raise StoreError(f"no run {run_id!r}")
            author = self._author(author if author is not None else model_author(str(run[1])))
            if game is not None and game != run[0]:
                raise StoreError(f"summary for run {run_id!r} is for {game!r} but the run is "
                                 f"{run[0]!r}")
            user = f"summary for run {run_id!r}"
            self._db._require_experience(conn, sources, "summary source", user)
            if for_episode_id is not None:
                producer = self._db._phases(conn, [for_episode_id]).get(for_episode_id)
                if producer is None and not is_explore_episode_id(run_id, for_episode_id):
                    raise LeakageError(f"{user}: {for_episode_id!r} is not a stored episode nor one "
                                       f"of the run's exploration episodes (a summary is written "
                                       f"for an exploration episode only)")
                if producer is None:
                    raise StoreError(f"{user}: no episode {for_episode_id!r} (store the episode a "
                                     f"summary is written for first: Episodes.add_episode_with_summary)")
                if _is_eval(*producer):
                    raise LeakageError(f"{user}: evaluation episode {for_episode_id!r} cannot be "
                                       f"a summary producer (held-out data never becomes "
                                       f"experience)")
            version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM summaries "
                                   "WHERE run_id = ?", (run_id,)).fetchone()[0]
            summary = Summary(id=summary_id or _new_id("sum"), run_id=run_id, game=run[0],
                              version=version, retain=retain, avoid=avoid, next=next,
                              source_episode_ids=sources, author=author,
                              parent_version=parent_version, for_episode_id=for_episode_id,
                              tokens_in=int(tokens_in), tokens_out=int(tokens_out), cost=cost)
            try:
                self._insert_summary(conn, summary)
            except sqlite3.IntegrityError as err:
                raise StoreError(f"summary {summary.id!r} already exists") from err
            if for_state_x is not None:
                cur = conn.execute("UPDATE experience_states SET summary_id = ? WHERE run_id = ? "
                                   "AND x = ? AND summary_id IS NULL", (summary.id, run_id,
                                                                        for_state_x))
                if cur.rowcount != 1:
                    raise StoreError(f"{user}: state x={for_state_x} has not begun or already "
                                     f"has its summary")
        return summary

    def get_summary(self, summary_id: str) -> Summary:
        with self._db._reading("read a summary") as conn:
            row = one_row(conn, _SELECT_SUMMARY + " WHERE id = ?", (summary_id,))
        if row is None:
            raise StoreError(f"no summary {summary_id!r}")
        return self._summary_from_row(row)

    def list(self, run_id: str) -> list[Summary]:
        """All versions of the run's summary, oldest first."""
        with self._db._reading("list summaries") as conn:
            return self._summaries_in(conn, run_id)

    def _summaries_in(self, conn: sqlite3.Connection, run_id: str) -> list[Summary]:
        rows = row_dicts(conn.execute(_SELECT_SUMMARY + " WHERE run_id = ? ORDER BY version",
                                      (run_id,)))
        return [self._summary_from_row(r) for r in rows]

    @staticmethod
    def _author(author: str) -> str:
        problem = author_problem(author)
        if problem:
            raise StoreError(problem)
        return author

    def update_summary_status(self, summary_id: str, status: Literal["active", "vetoed"], *,
                              author: str) -> Summary:
        """Veto a version (the agent skips it: models.summary_in_use) or restore it, by `author`
        ('human:<name>'). Logged in summary_actions with the first experience state it applies to."""
        if status not in SUMMARY_STATUSES:
            raise StoreError(f"bad summary status {status!r}: active or vetoed")
        self._author(author)
        with self._db._tx(f"set the status of summary {summary_id!r}") as conn:
            run_id = self._summary_run(conn, summary_id)
            conn.execute("UPDATE summaries SET status = ? WHERE id = ?", (status, summary_id))
            self._log_action(conn, run_id, summary_id, "veto" if status == "vetoed" else "unveto",
                             author)
        return self.get_summary(summary_id)

    def set_pinned(self, summary_id: str, pinned: bool, *, author: str) -> Summary:
        """Pin a version (at most one per run: pinning unpins the others) or unpin it, by `author`."""
        self._author(author)
        with self._db._tx(f"pin summary {summary_id!r}") as conn:
            run_id = self._summary_run(conn, summary_id)
            if pinned:
                conn.execute("UPDATE summaries SET pinned = 0 WHERE run_id = ? AND id != ?",
                             (run_id, summary_id))
            conn.execute("UPDATE summaries SET pinned = ? WHERE id = ?", (int(bool(pinned)),
                                                                         summary_id))
            self._log_action(conn, run_id, summary_id, "pin" if pinned else "unpin", author)
        return self.get_summary(summary_id)

    def edit_summary(self, summary_id: str, retain: str, avoid: str, next: str,
                     author: str) -> Summary:
        """A human edit: a new active version with parent_version, the editor and the time.
        Same sources as the parent; if the parent was pinned, the pin moves to the edit.
        Logged in summary_actions with the first experience state that will use it."""
        self._author(author)
        sections = {"retain": retain, "avoid": avoid, "next": next}
        if not any(str(text).strip() for text in sections.values()):
            raise StoreError(f"an empty edit of summary {summary_id!r} was not saved: write at "
                             f"least one section (to stop using a version, veto it)")
        for name, text in sections.items():
            if len(text) > MAX_EDIT_SECTION_CHARS:
                raise StoreError(f"the '{name}' section of an edit of summary {summary_id!r} is "
                                 f"{len(text):,} characters; the limit is "
                                 f"{MAX_EDIT_SECTION_CHARS:,} (nothing was saved)")
        with self._db._tx(f"edit summary {summary_id!r}") as conn:
            parent = self.get_summary(summary_id)
            new = self.add_summary(parent.run_id, retain, avoid, next,
                                   source_episode_ids=parent.source_episode_ids, author=author,
                                   parent_version=parent.version)
            self._log_action(conn, parent.run_id, new.id, "edit", author)
            if parent.pinned:
                new = self.set_pinned(new.id, True, author=author)
        return new

    # ------------------------------------------------------------------ curation and states

    def _summary_run(self, conn: sqlite3.Connection, summary_id: str) -> str:
        row = conn.execute("SELECT run_id FROM summaries WHERE id = ?", (summary_id,)).fetchone()
        if row is None:
            raise StoreError(f"no summary {summary_id!r}")
        return row[0]

    def _next_state(self, conn: sqlite3.Connection, run_id: str) -> Optional[int]:
        """The first experience state x of the run not begun yet (None: the run has no more)."""
        run = conn.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
        if run is None:
            return None
        try:
            last_x = int(json.loads(run[0]).get("explore_episodes", 0))
        except (TypeError, ValueError, AttributeError):
            return None
        last = conn.execute("SELECT x, summary_id FROM experience_states WHERE run_id = ? ORDER BY "
                            "x DESC LIMIT 1", (run_id,)).fetchone()
        if last is None:  # nothing begun yet, or a run from before states were recorded
            began = conn.execute("SELECT count(*) - 1 FROM episodes WHERE run_id = ? AND "
                                 "phase = 'explore' AND status = 'finished'", (run_id,)).fetchone()[0]
            nxt = int(began) + 1
        elif last[0] > 0 and last[1] is None and not self._driven(conn, run_id):
            nxt = int(last[0])  # never fixed, and its driver is gone: a resume begins it afresh
        else:
            nxt = int(last[0]) + 1
        return nxt if nxt <= last_x else None

    @staticmethod
    def _driven(conn: sqlite3.Connection, run_id: str) -> bool:
        from s3gym_tui.store.leases import _SELECT, _lease

        row = conn.execute(_SELECT + " WHERE run_id = ?", (run_id,)).fetchone()
        return row is not None and _lease(row).alive()

    def _log_action(self, conn: sqlite3.Connection, run_id: str, summary_id: str, action: str,
                    author: str) -> None:
        conn.execute("INSERT INTO summary_actions (run_id, summary_id, action, author, created_at, "
                     "effective_from_x) VALUES (?, ?, ?, ?, ?, ?)",
                     (run_id, summary_id, action, author, utcnow(), self._next_state(conn, run_id)))

    def summary_actions(self, run_id: str) -> list[dict[str, Any]]:
        """The run's curation log, oldest first: action, summary id and version, author, time,
        effective_from_x (the first experience state that sees it; None: no state will)."""
        with self._db._reading("read the curation log") as conn:
            return row_dicts(conn.execute(
                "SELECT a.id, a.action, a.summary_id, s.version, a.author, a.created_at, "
                "a.effective_from_x FROM summary_actions a JOIN summaries s ON s.id = a.summary_id "
                "WHERE a.run_id = ? ORDER BY a.id", (run_id,)))

    def begin_state(self, run_id: str, x: int) -> tuple[Optional[Summary], Optional[Summary]]:
        """Start experience state x of a summary run, or read it back when it began before.

        Returns (base, used): the version current when x began (pinned first, vetoes skipped) and
        the version state x uses when already known: the pinned base (used as is), the base at
        x = 0 (nothing to summarise yet), or the version the model wrote for x (add_summary with
        for_state_x). One write transaction: a curation commits either before it (x sees it) or
        after (x + 1 is the first that can)."""
        with self._db._tx(f"begin state x={x} of run {run_id!r}") as conn:
            row = conn.execute("SELECT base_summary_id, summary_id FROM experience_states WHERE "
                               "run_id = ? AND x = ?", (run_id, x)).fetchone()
            if row is None:
                current = summary_in_use(self._summaries_in(conn, run_id))
                base_id = current.id if current else None
                used_id = base_id if (x == 0 or (current and current.pinned)) else None
                conn.execute("INSERT INTO experience_states (run_id, x, base_summary_id, summary_id, "
                             "began_at) VALUES (?, ?, ?, ?, ?)", (run_id, x, base_id, used_id,
                                                                  utcnow()))
            else:
                base_id, used_id = row
            base = self.get_summary(base_id) if base_id else None
            used = self.get_summary(used_id) if used_id else None
        return base, used

    def state_x_began(self, run_id: str) -> dict[int, Optional[str]]:
        """x -> base summary id of every experience state the run has begun."""
        with self._db._reading("read experience states") as conn:
            return {r[0]: r[1] for r in conn.execute(
                "SELECT x, base_summary_id FROM experience_states WHERE run_id = ? ORDER BY x",
                (run_id,)).fetchall()}

    def state_summary_ids(self, run_id: str, x: int) -> Optional[tuple[Optional[str], Optional[str]]]:
        """(base, used) summary ids of the run's experience state x (see begin_state); None when x
        has not begun (or the run is from before states were recorded)."""
        with self._db._reading("read an experience state") as conn:
            row = conn.execute("SELECT base_summary_id, summary_id FROM experience_states WHERE "
                               "run_id = ? AND x = ?", (run_id, x)).fetchone()
        return None if row is None else (row[0], row[1])

    def next_state(self, run_id: str) -> Optional[int]:
        """The first experience state x that a curation made now would reach (None: none will)."""
        with self._db._reading("read the next state") as conn:
            return self._next_state(conn, run_id)

    def current_summary(self, run_id: str) -> Optional[Summary]:
        """The version the agent goes by next (models.summary_in_use): the pinned active one, else
        the latest active one; used as is at x = 0 or when pinned, else the base of a new one."""
        return summary_in_use(self.list(run_id))

