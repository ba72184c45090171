"""The episodes repository: episodes and their steps, under the held-out guard (tables episodes,
steps, step_repairs)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Mapping, Optional, get_args

from s3gym_tui.models import EVAL_SEED_BASE, Episode, Step, phase_of_seed, utcnow
from s3gym_tui.secrets import redact_values, secret_values
from s3gym_tui.store import stored_prompt
from s3gym_tui.store.connection import Connection, _insert_sql, _q
from s3gym_tui.store.errors import LeakageError, StoreError
from s3gym_tui.store.prompt_texts import Prompts
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, one_row, row_dicts
from s3gym_tui.store.search_schema import index_episode
from s3gym_tui.store.summaries import Summaries

EPISODE_STATUSES: tuple[str, ...] = get_args(Episode.model_fields["status"].annotation)
_EPISODE_COLS = tuple(Episode.model_fields)
_STEP_COLS = tuple(Step.model_fields)
_INSERT_EPISODE = _insert_sql("episodes", _EPISODE_COLS)
_INSERT_STEP = _insert_sql("steps", _STEP_COLS)
_SELECT_EPISODE = f"SELECT {', '.join(_q(c) for c in _EPISODE_COLS)} FROM episodes"
_TEXT_STEP_COLS = ("observation", "prompt", "reply", "action", "feedback", "proposed_action", "fault")
_SELECT_STEPS = f"SELECT {', '.join(_q(c) for c in _STEP_COLS)} FROM steps"


def _stored_prompt_candidates(conn: sqlite3.Connection, episode_id: str, index: int) -> set[int]:
    """The stored steps before `index` with a prompt that stored_prompt.base_index can choose: the
    latest one and its stride_base (it looks at no other). Two lookups that stop at their first row,
    not a scan of every earlier step's prompt (O(n) a step, O(n^2) an episode)."""
    found = {r[0] for r in conn.execute(
        'SELECT "index" FROM steps WHERE episode_id = ? AND "index" < ? AND prompt <> \'\' '
        'ORDER BY "index" DESC LIMIT 1', (episode_id, index))}
    back = stored_prompt.stride_base(index)
    if back is not None and back not in found and conn.execute(
            'SELECT 1 FROM steps WHERE episode_id = ? AND "index" = ? AND prompt <> \'\'',
            (episode_id, back)).fetchone():
        found.add(back)
    return found


def episode_from_row(row: Mapping[str, Any]) -> Episode:
    """A stored episodes row as an Episode."""
    return from_row(Episode, row, f"episode {row['id']!r}", {"history_episode_ids": "[]"})


class Episodes(Repository):
    """Episodes and steps. Reads and writes `episodes`, `steps`, `step_repairs` and the search index
    (a finished episode's steps); reads `runs` and `summaries` (the held-out guard, a summary's episode);
    writes a summary through `summaries` (add_episode_with_summary); expands a delta prompt's base through
    `prompts`."""

    def __init__(self, db: Connection, prompts: Prompts, summaries: Summaries) -> None:
        super().__init__(db)
        self._prompts = prompts
        self._summaries = summaries

    # ------------------------------------------------------------------ episodes

    def add_episode(self, episode: Episode, steps: Iterable[Step] = ()) -> Episode:
        """Insert a new episode, enforcing the seed/phase split and the history guard.
        `steps` (a fork's replayed prefix) are stored in the same transaction: all or nothing."""
        ep = episode
        what = f"episode {ep.id!r}"
        seed_phase = phase_of_seed(ep.seed)
        if ep.phase != seed_phase:
            raise LeakageError(f"{what} is phase {ep.phase!r} but seed {ep.seed} is an "
                               f"{seed_phase} seed (evaluation seeds are >= {EVAL_SEED_BASE})")
        if ep.run_id is not None and ep.mode != ep.phase:
            raise LeakageError(f"{what} of run {ep.run_id!r} has mode {ep.mode!r} but phase "
                               f"{ep.phase!r}")
        if ep.fork_step is not None and ep.fork_of is None:
            raise StoreError(f"{what} has fork_step but no fork_of")
        with self._db._tx(f"add {what}") as conn:
            if conn.execute("SELECT 1 FROM episodes WHERE id = ?", (ep.id,)).fetchone():
                raise StoreError(f"{what} already exists")
            if ep.run_id is not None:
                run = conn.execute("SELECT game FROM runs WHERE id = ?", (ep.run_id,)).fetchone()
                if run is None:
                    raise StoreError(f"{what}: no run {ep.run_id!r}")
                if run[0] != ep.game:
                    raise StoreError(f"{what} is {ep.game!r} but run {ep.run_id!r} is {run[0]!r}")
                if ep.phase == "eval" and ep.checkpoint is None:
                    raise StoreError(f"{what} is an evaluation episode of a run without a "
                                     f"checkpoint x")
                if ep.phase == "explore" and ep.checkpoint is not None:
                    raise StoreError(f"{what} is an exploration episode with checkpoint "
                                     f"{ep.checkpoint}")
            self._db._require_experience(conn, ep.history_episode_ids, "history source", what)
            if ep.phase == "eval" or ep.mode == "eval":
                produced = conn.execute("SELECT id FROM summaries WHERE for_episode_id = ? "
                                        "LIMIT 1", (ep.id,)).fetchone()
                if produced:
                    raise LeakageError(f"{what} is an evaluation episode but summary "
                                       f"{produced[0]!r} was written for it")
            if ep.fork_of is not None and ep.fork_of not in self._db._phases(conn, [ep.fork_of]):
                raise StoreError(f"{what}: fork source {ep.fork_of!r} does not exist")
            if ep.summary_id is not None and not conn.execute(
                    "SELECT 1 FROM summaries WHERE id = ?", (ep.summary_id,)).fetchone():
                raise StoreError(f"{what}: no summary {ep.summary_id!r}")
            conn.execute(_INSERT_EPISODE, self._episode_values(ep))
            steps = list(steps)
            if steps:
                self.add_steps(steps)  # nested: part of this transaction
                ep = ep.model_copy(update={"n_steps": ep.n_steps + len(steps)})
        return ep

    def add_episode_with_summary(self, episode: Episode, retain: str, avoid: str, next: str,
                                 **summary_fields: Any) -> tuple[Episode, Any]:
        """Store an exploration episode and the summary written at its step 0, in one transaction:
        the episode first (summaries.for_episode_id is a foreign key to it), then the summary,
        then the episode's summary_id set to it (the version its state uses). Returns
        (episode, summary)."""
        if episode.phase != "explore" or episode.run_id is None:
            raise LeakageError(f"episode {episode.id!r}: only a run's exploration episode can have a "
                               f"summary written for it")
        with self._db._tx(f"add episode {episode.id!r} with its summary"):
            self.add_episode(episode.model_copy(update={"summary_id": None}))
            summary = self._summaries.add_summary(episode.run_id, retain, avoid, next,
                                       for_episode_id=episode.id, **summary_fields)
            stored = self.set_episode_summary(episode.id, summary.id)
        return stored, summary

    @staticmethod
    def _episode_values(ep: Episode) -> tuple:
        data = ep.model_dump()
        data["history_episode_ids"] = json.dumps(list(ep.history_episode_ids))
        return tuple(data[c] for c in _EPISODE_COLS)

    def get_episode(self, episode_id: str) -> Episode:
        episode = self.find_episode(episode_id)
        if episode is None:
            raise StoreError(f"no episode {episode_id!r}")
        return episode

    def find_episode(self, episode_id: str) -> Optional[Episode]:
        """The episode, or None if there is none with this id."""
        with self._db._reading("read an episode") as conn:
            row = one_row(conn, _SELECT_EPISODE + " WHERE id = ?", (episode_id,))
        return None if row is None else episode_from_row(row)

    def list(self, run_id: Optional[str] = None, phase: Optional[str] = None,
                 checkpoint: Optional[int] = None, limit: Optional[int] = None) -> list[Episode]:
        """Episodes in insertion order, filtered by run, phase and checkpoint x."""
        where, params = [], []
        for col, value in (("run_id", run_id), ("phase", phase), ("checkpoint", checkpoint)):
            if value is not None:
                where.append(f"{col} = ?")
                params.append(value)
        sql = _SELECT_EPISODE + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self._db._reading("list episodes") as conn:
            rows = row_dicts(conn.execute(sql, params))
        return [episode_from_row(r) for r in rows]

    def finish_episode(self, episode_id: str, score: Optional[float],
                       status: str = "finished") -> Episode:
        if status not in EPISODE_STATUSES or status == "running":
            raise StoreError(f"bad final status {status!r}: finished, failed or stopped")
        with self._db._tx(f"finish episode {episode_id!r}") as conn:
            cur = conn.execute("UPDATE episodes SET score = ?, status = ?, finished_at = ? "
                               "WHERE id = ?", (score, status, utcnow(), episode_id))
            if cur.rowcount == 0:
                raise StoreError(f"no episode {episode_id!r}")
            index_episode(conn, episode_id)  # its steps into the search index, in one batch
        return self.get_episode(episode_id)

    def set_episode_summary(self, episode_id: str, summary_id: Optional[str]) -> Episode:
        """Record which summary version the agent saw (written after the episode row exists)."""
        with self._db._tx(f"set the summary of episode {episode_id!r}") as conn:
            if summary_id is not None and not conn.execute(
                    "SELECT 1 FROM summaries WHERE id = ?", (summary_id,)).fetchone():
                raise StoreError(f"no summary {summary_id!r}")
            cur = conn.execute("UPDATE episodes SET summary_id = ? WHERE id = ?",
                               (summary_id, episode_id))
            if cur.rowcount == 0:
                raise StoreError(f"no episode {episode_id!r}")
        return self.get_episode(episode_id)

    # ------------------------------------------------------------------ steps

    @staticmethod
    def _step_values(step: Step, secrets: list[str]) -> tuple:
        data = step.model_dump()
        if secrets:  # a safety net: replies are redacted on arrival (engine.llm), human input here
            for col in _TEXT_STEP_COLS:
                if data[col]:
                    data[col] = redact_values(data[col], secrets)
        return tuple(data[c] for c in _STEP_COLS)

    def add_step(self, step: Step, repair: Optional[tuple[str, str]] = None,
                 shared: Optional[str] = None) -> Step:
        """Store one step and bump its episode's n_steps, in one transaction; returns the step as
        stored (its prompt in stored form). `repair`: (the model's own reply, the repaired reply the
        game acted on) when the provider repaired it; `shared`: see add_steps."""
        return self._add_steps([step], {0: repair} if repair is not None else None, shared)[0]

    def add_steps(self, steps: Iterable[Step], repairs: Optional[Mapping[int, tuple[str, str]]] = None,
                  shared: Optional[str] = None) -> int:
        """Store steps (e.g. a fork's replayed prefix) in one transaction; refuse duplicates.
        A step's prompt is the prompt as sent (or '' for none); it is stored as copies of an earlier
        prompt of its episode plus new text (store/stored_prompt.py), with `shared` (a large part that
        other prompts repeat, an episode's Hint Messages as it appears in the prompt) stored once.
        `repairs`: position in `steps` -> (original reply, repaired reply), stored with the step."""
        return len(self._add_steps(list(steps), repairs, shared))

    def _add_steps(self, steps: list[Step], repairs: Optional[Mapping[int, tuple[str, str]]],
                   shared: Optional[str]) -> list[Step]:
        if not steps:
            return []
        what = (f"add step {steps[0].index} of episode {steps[0].episode_id!r}" if len(steps) == 1
                else f"add {len(steps)} steps")
        secrets = secret_values()
        with self._db._tx(what) as conn:
            counts: dict[str, int] = {}
            added: dict[tuple[str, int], str] = {}
            full_texts: dict[tuple[str, int], str] = {}  # prompts as sent
            stored: list[Step] = []
            for position, step in enumerate(steps):
                if step.episode_id not in counts:
                    if not conn.execute("SELECT 1 FROM episodes WHERE id = ?",
                                        (step.episode_id,)).fetchone():
                        raise StoreError(f"cannot {what}: no episode {step.episode_id!r}")
                    counts[step.episode_id] = 0
                if step.prompt:
                    step, full = self._stored(conn, step, added, full_texts, shared)
                    full_texts[(step.episode_id, step.index)] = full
                stored.append(step)
                try:
                    conn.execute(_INSERT_STEP, self._step_values(step, secrets))
                except sqlite3.IntegrityError as err:
                    if "UNIQUE" in str(err):
                        raise StoreError(f"step {step.index} of episode {step.episode_id!r} is "
                                         f"already stored") from err
                    raise
                counts[step.episode_id] += 1
                added[(step.episode_id, step.index)] = step.prompt
                repair = (repairs or {}).get(position)
                if repair is not None:
                    original, repaired = (redact_values(str(t), secrets) for t in repair)
                    conn.execute('INSERT INTO step_repairs (episode_id, "index", original_reply, repaired_reply) '
                                 'VALUES (?, ?, ?, ?)', (step.episode_id, step.index, original, repaired))
            for episode_id, n in counts.items():
                conn.execute("UPDATE episodes SET n_steps = n_steps + ? WHERE id = ?",
                             (n, episode_id))
        for step in stored:  # committed (unless nested in a caller's transaction): the next prompts' bases
            if step.prompt:
                self._prompts._remember(step.episode_id, step.index, step.prompt,
                                        full_texts[(step.episode_id, step.index)])
        return stored

    def _stored(self, conn: sqlite3.Connection, step: Step, added: Mapping[tuple[str, int], str],
                full_texts: Mapping[tuple[str, int], str], shared: Optional[str]) -> tuple[Step, str]:
        """The step with its prompt (as sent) in stored form, against the base rule of
        stored_prompt.base_index among the earlier steps of its episode with a prompt; and the prompt
        as sent (secrets redacted)."""
        earlier = {i for (e, i), p in added.items() if e == step.episode_id and i < step.index and p}
        earlier |= _stored_prompt_candidates(conn, step.episode_id, step.index)
        base_index = stored_prompt.base_index(step.index, sorted(earlier))
        base = None
        if base_index is not None:
            text = full_texts.get((step.episode_id, base_index))
            base = (base_index, text if text is not None else
                    self._prompts.step_prompt(step.episode_id, base_index))
        full = redact_values(step.prompt)
        return step.model_copy(update={"prompt": self._prompts.encode(full, base, shared)}), full

    def steps(self, episode_id: str, *, include_prompt: bool = True) -> list[Step]:
        """An episode's steps in order (one index range scan). include_prompt=False leaves
        `prompt` empty, for views that do not need the (possibly large) prompts; see step_prompt."""
        sql = _SELECT_STEPS if include_prompt else _SELECT_STEPS.replace('"prompt"', "'' AS prompt")
        with self._db._reading(f"read steps of episode {episode_id!r}") as conn:
            cursor = conn.execute(sql + ' WHERE episode_id = ? ORDER BY "index"', (episode_id,))
            rows = cursor.fetchall()
        return [from_row(Step, dict(zip(_STEP_COLS, r)), f"step of episode {episode_id!r}") for r in rows]

    def step_latencies(self, model: str, game: Optional[str] = None, limit: int = 200) -> list[float]:
        """Call times (ms) of the model's most recent stored steps (on `game` when given), newest
        first; only steps the model itself answered with a measured time."""
        sql = ('SELECT s.latency_ms FROM steps s JOIN episodes e ON e.id = s.episode_id '
               "WHERE e.model = ? AND s.actor = 'model' AND s.latency_ms > 0")
        args: list = [model]
        if game is not None:
            sql += " AND e.game = ?"
            args.append(game)
        with self._db._reading("read step times") as conn:
            rows = conn.execute(sql + " ORDER BY s.rowid DESC LIMIT ?", (*args, limit)).fetchall()
        return [float(r[0]) for r in rows]

    def last_step_index(self, episode_id: str) -> Optional[int]:
        """Highest stored step index of the episode, or None if it has no steps."""
        with self._db._reading("read steps") as conn:
            row = conn.execute('SELECT max("index") FROM steps WHERE episode_id = ?',
                               (episode_id,)).fetchone()
        return row[0]
