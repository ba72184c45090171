"""Searching the store: words (the FTS5 index of search_schema.py) and structured filters beside
them, over steps, summary versions and annotation notes; plus indexing the backlog of an upgraded
file (a mixin of Store).

Words. Every word must appear (in any indexed field, or in a note or label on the step);
"a phrase" in double quotes must appear as is; `word*` matches words that start so; `-word` leaves
out what contains it. Case and diacritics are ignored (unicode61). With no words, the filters alone
select (newest first).

Order. Newest matching steps first (the index returns them in step-id order, so a query stops at
`limit` instead of ranking every match: the answer time does not grow with how common a word is);
results are then grouped by episode. Summary versions and episode notes come after the steps.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Optional, Sequence

from pydantic import Field, field_validator, model_validator

from s3gym_tui.models import PATHWAYS, Frozen
from s3gym_tui.store import search_schema
from s3gym_tui.store.connection import Connection
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.hygiene import Hygiene

Verdict = Literal["agree", "over", "under", "missing"]
VERDICTS: tuple[str, ...] = ("agree", "over", "under", "missing")
ACTORS: tuple[str, ...] = ("model", "human", "human-edit")
PHASES: tuple[str, ...] = ("explore", "eval")
FIELDS: tuple[str, ...] = (*search_schema.STEP_FIELDS, "summary", "note")
DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
LINE_CHARS = 240  # of a matching line shown per hit
LINES_PER_HIT = 3
FLUSH_AT_MOST = 20_000  # steps a search indexes on its own before answering (more: index_backlog, with progress)
BACKLOG_BATCH = 5_000  # steps indexed per committed batch (about 0.1-0.3 s each)
INDEX_GROWTH = 0.5  # free space asked before indexing a backlog: this share of the file (the index is < 30%)
_WORD = re.compile(r"\w+", re.UNICODE)
_QUERY_PART = re.compile(r'(-?)"([^"]*)"|(\S+)')


class SearchFilters(Frozen):
    """The structured filters beside the words; an empty tuple or None means 'any'. Values of one
    filter are alternatives (OR); different filters all apply (AND)."""

    games: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    sweeps: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    pathways: tuple[str, ...] = ()
    phases: tuple[Literal["explore", "eval"], ...] = ()
    verdicts: tuple[Verdict, ...] = ()  # the step's self-judgement against the verifier (engine.judging)
    self_min: Optional[float] = None  # self-score s within [self_min, self_max] (a missing s never is)
    self_max: Optional[float] = None
    reward_min: Optional[float] = None  # verifier reward r within [reward_min, reward_max]
    reward_max: Optional[float] = None
    faults: tuple[str, ...] = ()  # 'any' (some fault), 'none' (no fault), or words found in the fault
    actors: tuple[Literal["model", "human", "human-edit"], ...] = ()
    forks: Optional[bool] = None  # True: the own steps of forked episodes; False: no forked episode
    divergences: bool = False  # only the first divergence of a Compare pair (engine.finding computes them)
    labels: tuple[str, ...] = ()  # annotated (the step or its episode; a summary) with one; 'any': any label
    fields: tuple[str, ...] = ()  # where the words may be: action, reply, feedback, observation, summary, note

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """A game's canonical name (as stored); an unknown one is refused listing the seven, as every command does."""
        from s3gym_games import canonical

        return tuple(canonical(name) for name in value)

    @field_validator("pathways")
    @classmethod
    def _known_pathways(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in PATHWAYS:
                raise ValueError(f"unknown pathway {name!r}: one of {', '.join(PATHWAYS)}")
        return value

    @field_validator("fields")
    @classmethod
    def _known_fields(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in FIELDS:
                raise ValueError(f"unknown field {name!r}: one of {', '.join(FIELDS)}")
        return value

    @model_validator(mode="after")
    def _finite_ranges(self) -> "SearchFilters":
        for name in ("self_min", "self_max", "reward_min", "reward_max"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number")
        for low, high in (("self_min", "self_max"), ("reward_min", "reward_max")):
            a, b = getattr(self, low), getattr(self, high)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{low} {a:g} is above {high} {b:g}")
        return self

    @property
    def step_only(self) -> bool:
        """A filter only a step can pass (summaries and episode notes are then left out)."""
        return bool(self.phases or self.verdicts or self.actors or self.faults or self.divergences
                    or self.forks is not None
                    or any(v is not None for v in (self.self_min, self.self_max, self.reward_min,
                                                   self.reward_max)))

    def searches(self, name: str) -> bool:
        return not self.fields or name in self.fields


@dataclass(frozen=True)
class Term:
    """One positive word of a query (for highlighting): lower case, prefix when it ended in *."""

    text: str
    prefix: bool = False


@dataclass(frozen=True)
class ParsedQuery:
    fts: str  # FTS5 syntax, every user word quoted (no operator of FTS5 can be typed by accident)
    terms: tuple[Term, ...]

    @property
    def empty(self) -> bool:
        return not self.fts


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def parse_query(text: str) -> ParsedQuery:
    """The words a person typed as FTS5 syntax (see the module docstring); StoreError when only
    exclusions were given."""
    positive: list[str] = []
    negative: list[str] = []
    terms: list[Term] = []
    for match in _QUERY_PART.finditer(text or ""):
        neg, phrase, word = match.group(1), match.group(2), match.group(3)
        if phrase is not None:
            tokens = _WORD.findall(phrase)
            if not tokens:
                continue
            part = _quote(" ".join(tokens))
            (negative if neg else positive).append(part)
            if not neg:
                terms.extend(Term(t.casefold()) for t in tokens)
            continue
        assert word is not None
        is_neg = word.startswith("-") and len(word) > 1
        body = word[1:] if is_neg else word
        prefix = body.endswith("*")
        tokens = _WORD.findall(body)
        if not tokens:
            continue
        part = _quote(" ".join(tokens)) + ("*" if prefix else "")
        (negative if is_neg else positive).append(part)
        if not is_neg:
            terms.extend(Term(t.casefold(), prefix and i == len(tokens) - 1) for i, t in enumerate(tokens))
    if negative and not positive:
        raise StoreError("a search needs a word to look for besides the -words it leaves out")
    fts = " AND ".join(positive)
    if negative:
        fts = f"({fts})" + "".join(f" NOT {n}" for n in negative)
    return ParsedQuery(fts, tuple(dict.fromkeys(terms)))


def match_spans(text: str, terms: Sequence[Term]) -> list[tuple[int, int]]:
    """(start, end) of every word of `text` a term matches (case-insensitive), sorted, merged."""
    if not terms or not text:
        return []
    wanted = {t.text for t in terms if not t.prefix}
    prefixes = tuple(t.text for t in terms if t.prefix)
    spans = []
    for word in _WORD.finditer(text):
        w = word.group(0).casefold()
        if w in wanted or (prefixes and w.startswith(prefixes)):
            spans.append((word.start(), word.end()))
    return spans


@dataclass(frozen=True)
class MatchLine:
    """One line of a hit that matched (or, without words, the line that shows it)."""

    field: str  # action, reply, feedback, observation, retain, avoid, next, note
    text: str


class SearchHit(Frozen):
    """A step, an episode (through a note on it) or a summary version that matched."""

    kind: Literal["step", "episode", "summary"]
    step_id: Optional[int] = None
    episode_id: Optional[str] = None
    step_index: Optional[int] = None
    summary_id: Optional[str] = None
    version: Optional[int] = None
    run_id: Optional[str] = None
    game: str = ""
    model: str = ""
    pathway: str = ""
    phase: Optional[str] = None
    action: Optional[str] = None
    self_score: Optional[float] = None
    reward: Optional[float] = None
    verdict: Optional[str] = None
    actor: Optional[str] = None
    fault: Optional[str] = None
    lines: tuple[tuple[str, str], ...] = ()  # (field, one line of text)
    labels: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """As `s3gym annotate` takes it: EPISODE#INDEX, EPISODE or summary:ID."""
        from s3gym_tui.store.annotations import annotation_target

        return annotation_target(self.kind, self.episode_id, self.step_index, self.summary_id)

    @property
    def group(self) -> str:
        """The group it is shown in: its episode, or 'run R summaries'."""
        return str(self.episode_id) if self.kind != "summary" else f"{self.run_id} · summaries"


class SearchResult(Frozen):
    query: str
    filters: SearchFilters
    terms: tuple[tuple[str, bool], ...] = ()  # (word, prefix) for highlighting
    hits: tuple[SearchHit, ...] = ()
    more: bool = False  # more matches than the limit
    seconds: float = 0.0
    backlog: int = 0  # older steps not indexed yet (their words are not found until they are)
    unindexed_why: str = ""  # why they were not indexed now: the store's one line (disk full, read-only, ...)
    limit: int = DEFAULT_LIMIT

    @property
    def incomplete(self) -> bool:
        """Words were looked for while steps could not be indexed (unindexed_why says why): matches among
        those were not found (filters alone read the steps themselves and miss nothing)."""
        return bool(self.backlog and self.terms and self.unindexed_why)

    @property
    def unindexed_reason(self) -> str:
        """unindexed_why in two or three words, for a status line."""
        low = self.unindexed_why.lower()
        for needle, short in (("disk full", "disk full"), ("not enough free space", "disk full"),
                              ("read-only", "read-only here"), ("locked", "file busy"), ("wait", "many waiting")):
            if needle in low:
                return short
        return "not indexed" if low else ""

    def groups(self) -> list[tuple[str, list[SearchHit]]]:
        """Hits grouped by episode (then summaries by run), in the order the groups first appear;
        steps within an episode by index."""
        order: dict[str, list[SearchHit]] = {}
        for hit in self.hits:
            order.setdefault(hit.group, []).append(hit)
        for hits in order.values():
            hits.sort(key=lambda h: (h.kind != "episode", h.step_index or 0, h.version or 0))
        return list(order.items())

    def term_list(self) -> list[Term]:
        return [Term(t, p) for t, p in self.terms]


def step_verdict(s: Optional[float], r: Optional[float]) -> str:
    """engine.judging.verdict, repeated here so the store does not import the engine (the SQL
    filter below is the same rule; a test checks all three agree)."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "missing"
    said, got = s > 0, (r or 0.0) > 0
    if said == got:
        return "agree"
    return "over" if said else "under"


_VERDICT_SQL = {
    "missing": "s.self_score IS NULL",
    "agree": "(s.self_score IS NOT NULL AND (s.self_score > 0) = (s.reward > 0))",
    "over": "(s.self_score > 0 AND s.reward <= 0)",
    "under": "(s.self_score <= 0 AND s.reward > 0)",
}


def _in(column: str, values: Sequence[Any], params: list[Any]) -> str:
    params.append(json.dumps(list(values)))
    return f"{column} IN (SELECT value FROM json_each(?))"


def _run_filters(f: SearchFilters, game: str, run: str, model: str, pathway: str,
                 params: list[Any]) -> list[str]:
    """Filters a run's rows share (steps through their episode, summaries through their run)."""
    where = []
    if f.games:
        where.append(_in(game, f.games, params))
    if f.runs:
        where.append(_in(run, f.runs, params))
    if f.sweeps:
        params.append(json.dumps(list(f.sweeps)))
        where.append(f"{run} IN (SELECT id FROM runs WHERE sweep_id IN (SELECT value FROM json_each(?)))")
    if f.models:
        where.append(_in(model, f.models, params))
    if f.pathways:
        where.append(_in(pathway, f.pathways, params))
    return where


def _label_filter(f: SearchFilters, step: bool, params: list[Any]) -> list[str]:
    if not f.labels:
        return []
    any_label = "any" in f.labels
    label_sql = "" if any_label else " AND a.label IN (SELECT value FROM json_each(?))"
    if step:
        sql = ("EXISTS (SELECT 1 FROM annotations a WHERE a.episode_id = s.episode_id AND "
               "(a.step_index = s.\"index\" OR a.kind = 'episode')" + label_sql + ")")
    else:
        sql = "EXISTS (SELECT 1 FROM annotations a WHERE a.summary_id = m.id" + label_sql + ")"
    if not any_label:
        params.append(json.dumps(list(f.labels)))
    return [sql]


def step_filters(f: SearchFilters, params: list[Any], divergences: Optional[Iterable[tuple[str, int]]] = None
                 ) -> list[str]:
    """SQL conditions on `s` (steps) and `e` (its episode) for every filter (also used by tests)."""
    where = _run_filters(f, "e.game", "e.run_id", "e.model", "e.pathway", params)
    if f.phases:
        where.append(_in("e.phase", f.phases, params))
    if f.verdicts:
        where.append("(" + " OR ".join(_VERDICT_SQL[v] for v in dict.fromkeys(f.verdicts)) + ")")
    for value, sql in ((f.self_min, "s.self_score >= ?"), (f.self_max, "s.self_score <= ?"),
                       (f.reward_min, "s.reward >= ?"), (f.reward_max, "s.reward <= ?")):
        if value is not None:
            where.append(sql)
            params.append(float(value))
    if f.faults:
        parts = []
        for kind in f.faults:
            if kind == "any":
                parts.append("s.fault IS NOT NULL AND s.fault != ''")
            elif kind == "none":
                parts.append("(s.fault IS NULL OR s.fault = '')")
            else:
                parts.append("instr(lower(s.fault), lower(?)) > 0")
                params.append(kind)
        where.append("(" + " OR ".join(f"({p})" for p in parts) + ")")
    if f.actors:
        where.append(_in("s.actor", f.actors, params))
    if f.forks is True:
        where.append("e.fork_of IS NOT NULL AND s.\"index\" >= coalesce(e.fork_step, 0)")
    elif f.forks is False:
        where.append("e.fork_of IS NULL")
    if f.divergences:
        pairs = sorted(set(divergences or ()))
        params.append(json.dumps([[e, i] for e, i in pairs]))
        where.append("(s.episode_id, s.\"index\") IN (SELECT json_extract(value, '$[0]'), "
                     "json_extract(value, '$[1]') FROM json_each(?))")
    where += _label_filter(f, True, params)
    return where


_STEP_SELECT = ('SELECT s.id, s.episode_id, s."index", s.action, s.self_score, s.reward, s.actor, s.fault, '
                "s.reply, s.feedback, s.observation, e.run_id, e.game, e.model, e.pathway, e.phase")


def _lines(fields: Sequence[tuple[str, str]], terms: Sequence[Term], limit: int = LINES_PER_HIT
           ) -> tuple[tuple[str, str], ...]:
    """The lines of the given fields that hold a matching word (each cut around its first match)."""
    found: list[tuple[str, str]] = []
    for field, text in fields:
        for line in (text or "").splitlines():
            spans = match_spans(line, terms)
            if not spans:
                continue
            start = max(0, spans[0][0] - LINE_CHARS // 3) if len(line) > LINE_CHARS else 0
            cut = line[start:start + LINE_CHARS]
            found.append((field, ("…" if start else "") + cut + ("…" if start + LINE_CHARS < len(line) else "")))
            if len(found) >= limit:
                return tuple(found)
    return tuple(found)


class Search(Repository):
    """find(), the index's backlog and its size. Reads and writes the search index (`search_steps`,
    `search_summaries`, `search_notes`); reads `runs`, `episodes`, `steps`, `summaries`, `annotations`; the file's size
    through `hygiene`."""

    def __init__(self, db: Connection, hygiene: Hygiene) -> None:
        super().__init__(db)
        self._hygiene = hygiene

    # ------------------------------------------------------------------ the backlog

    def search_backlog(self) -> int:
        """Steps stored before the index existed and not indexed yet."""
        with self._db._reading("measure the search backlog") as conn:
            return search_schema.backlog(conn)

    def index_backlog(self, progress: Optional[Callable[[int, int], None]] = None,
                      batch: int = BACKLOG_BATCH,
                      free_bytes: Callable[[str], int] = lambda p: shutil.disk_usage(p).free) -> int:
        """Index the backlog in committed batches (Ctrl-C loses at most the batch under way; the next
        call goes on). `progress(done, total)` after each batch. Refuses, with nothing written, when
        the disk is short of INDEX_GROWTH x the file. Returns the steps indexed."""
        total = self.search_backlog()
        if not total:
            return 0
        if self._db.read_only:
            raise StoreError(f"{self._db.path} is open read-only: {total:,} older steps cannot be indexed for "
                             f"search (open it writable once)")
        from s3gym_tui.store.upgrade import human_bytes

        need = int(self._hygiene.file_bytes() * INDEX_GROWTH * total / max(1, self._step_count()))
        try:
            free = free_bytes(str(self._db.path.parent))
        except OSError:
            free = need
        if free < need:
            raise StoreError(f"not enough free space to index {total:,} older steps of {self._db.path} for search: "
                             f"about {human_bytes(need)} needed, {human_bytes(free)} free; nothing was changed")
        done = 0
        while True:
            with self._db._tx("index older steps for search") as conn:
                n, finished = search_schema.index_batch(conn, batch)
            done += n
            if progress:
                progress(done, total)
            if finished:
                return done

    def index_pending(self, at_most: Optional[int] = None) -> int:
        """Index the steps stored since the last search or episode end, whoever stored them (one
        write transaction), unless the store is read-only or more than `at_most` wait (an upgraded
        file's steps: index_backlog, with progress). Returns the steps indexed."""
        if self._db.read_only or self._db.immutable:
            return 0
        with self._db._reading("count steps not indexed") as conn:
            if not search_schema.has_search(conn):
                return 0
            waiting = search_schema.backlog(conn)
        if not waiting or waiting > (FLUSH_AT_MOST if at_most is None else at_most):
            return 0
        with self._db._tx("index new steps for search") as conn:
            return search_schema.index_batch(conn, None)[0]

    def _step_count(self) -> int:
        with self._db._reading("count steps") as conn:
            return conn.execute("SELECT count(*) FROM steps").fetchone()[0]

    # ------------------------------------------------------------------ searching

    def find(self, query: str = "", filters: Optional[SearchFilters] = None, *, limit: int = DEFAULT_LIMIT,
             divergences: Optional[Iterable[tuple[str, int]]] = None) -> SearchResult:
        """Steps (and summary versions, episode notes) matching the words and the filters, newest first,
        at most `limit` of each kind (`more` says when there were more). `divergences`: the (episode,
        step index) pairs the divergences filter keeps (engine.finding computes them)."""
        started = time.perf_counter()
        f = filters or SearchFilters()
        limit = max(1, min(int(limit), MAX_LIMIT))
        parsed = parse_query(query)
        if parsed.empty and not f.labels and f == SearchFilters(fields=f.fields):
            raise StoreError("give words to look for or at least one filter")
        why = ""
        try:
            self.index_pending()
        except StoreError as exc:  # the file is busy or full: search what is indexed and say how much is not, and why
            why = " ".join(str(exc).split())
        with self._db.snapshot("search the store"):
            conn = self._db._live("search the store")
            backlog = search_schema.backlog(conn)
            try:
                steps, more = self._step_hits(conn, parsed, f, limit, divergences)
                others, more_others = self._other_hits(conn, parsed, f, limit)
            except sqlite3.Error as err:
                raise self._db._wrap(err, "search the store") from err
        if backlog and not why and (self._db.read_only or self._db.immutable):
            why = f"{self._db.path} is open read-only"
        elif backlog > FLUSH_AT_MOST and not why:
            why = f"more than {FLUSH_AT_MOST:,} steps wait (`s3gym search` indexes them first, with progress)"
        # (else steps stored by a run after index_pending: the next search finds them)
        return SearchResult(query=query, filters=f, terms=tuple((t.text, t.prefix) for t in parsed.terms),
                            hits=tuple(steps + others), more=more or more_others,
                            seconds=time.perf_counter() - started, backlog=backlog,
                            unindexed_why=why if backlog else "", limit=limit)

    def _step_fts(self, parsed: ParsedQuery, f: SearchFilters) -> Optional[str]:
        """The MATCH expression on search_steps limited to the chosen fields, None if none is chosen."""
        cols = [c for c in search_schema.STEP_FIELDS if f.searches(c)]
        if not cols:
            return None
        if len(cols) == len(search_schema.STEP_FIELDS):
            return parsed.fts
        return "{" + " ".join(cols) + "} : (" + parsed.fts + ")"

    def _step_hits(self, conn: sqlite3.Connection, parsed: ParsedQuery, f: SearchFilters, limit: int,
                   divergences) -> tuple[list[SearchHit], bool]:
        params: list[Any] = []
        where = step_filters(f, params, divergences)
        rows: dict[int, tuple] = {}
        if parsed.empty:
            sql = (f"{_STEP_SELECT} FROM steps s JOIN episodes e ON e.id = s.episode_id "
                   f"{'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY s.id DESC LIMIT ?")
            for row in conn.execute(sql, [*params, limit + 1]):
                rows[row[0]] = row
        else:
            fts = self._step_fts(parsed, f)
            if fts is not None:
                sql = (f"{_STEP_SELECT} FROM search_steps f JOIN steps s ON s.id = f.rowid "
                       f"JOIN episodes e ON e.id = s.episode_id WHERE search_steps MATCH ? "
                       f"{''.join(' AND ' + w for w in where)} ORDER BY f.rowid DESC LIMIT ?")
                for row in conn.execute(sql, [fts, *params, limit + 1]):
                    rows[row[0]] = row
            if f.searches("note"):  # a note or label on the step itself
                sql = (f"{_STEP_SELECT} FROM search_notes n JOIN annotations a ON a.id = n.rowid "
                       f"JOIN steps s ON s.episode_id = a.episode_id AND s.\"index\" = a.step_index "
                       f"JOIN episodes e ON e.id = s.episode_id WHERE search_notes MATCH ? AND a.kind = 'step' "
                       f"{''.join(' AND ' + w for w in where)} ORDER BY s.id DESC LIMIT ?")
                for row in conn.execute(sql, [parsed.fts, *params, limit + 1]):
                    rows[row[0]] = row
        ordered = sorted(rows.values(), key=lambda r: -r[0])
        more = len(ordered) > limit
        ordered = ordered[:limit]
        notes = self._notes_by_step(conn, [(r[1], r[2]) for r in ordered])
        terms = list(parsed.terms)
        hits = []
        for (sid, episode_id, index, action, s, r, actor, fault, reply, feedback, observation, run_id, game,
             model, pathway, phase) in ordered:
            own = notes.get((episode_id, index), [])
            fields = [(c, v) for c, v in (("action", action), ("reply", reply), ("feedback", feedback),
                                           ("observation", observation)) if f.searches(c)]
            fields += [("note", f"{label}: {note}") for label, note in own if f.searches("note")]
            lines = _lines(fields, terms) if terms else (("action", (action or "")[:LINE_CHARS]),)
            hits.append(SearchHit(kind="step", step_id=sid, episode_id=episode_id, step_index=index,
                                  run_id=run_id, game=game, model=model, pathway=pathway, phase=phase,
                                  action=action, self_score=s, reward=r, verdict=step_verdict(s, r),
                                  actor=actor, fault=fault, lines=lines or (("action", (action or "")[:LINE_CHARS]),),
                                  labels=tuple(dict.fromkeys(label for label, _ in own))))
        return hits, more

    @staticmethod
    def _notes_by_step(conn: sqlite3.Connection, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], list]:
        if not keys:
            return {}
        found: dict[tuple[str, int], list] = {}
        sql = ("SELECT episode_id, step_index, label, note FROM annotations WHERE kind = 'step' AND "
               "(episode_id, step_index) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') "
               "FROM json_each(?)) ORDER BY id")
        for episode_id, index, label, note in conn.execute(sql, (json.dumps([list(k) for k in keys]),)):
            found.setdefault((episode_id, index), []).append((label, note))
        return found

    def _other_hits(self, conn: sqlite3.Connection, parsed: ParsedQuery, f: SearchFilters, limit: int
                    ) -> tuple[list[SearchHit], bool]:
        """Summary versions (their text, or a note on them) and episodes (a note on them)."""
        if f.step_only:
            return [], False
        terms = list(parsed.terms)
        hits: list[SearchHit] = []
        more = False
        # summary versions
        params: list[Any] = []
        where = _run_filters(f, "m.game", "m.run_id", "r.model", "r.pathway", params)
        where += _label_filter(f, False, params)
        matches: list[str] = []
        match_params: list[Any] = []
        if not parsed.empty:
            if f.searches("summary"):
                matches.append("m.id IN (SELECT summary_id FROM search_summaries WHERE search_summaries MATCH ?)")
                match_params.append(parsed.fts)
            if f.searches("note"):
                matches.append("m.id IN (SELECT a.summary_id FROM search_notes n JOIN annotations a ON "
                               "a.id = n.rowid WHERE search_notes MATCH ? AND a.kind = 'summary')")
                match_params.append(parsed.fts)
            if not matches:
                matches = ["0"]
        conds = ([f"({' OR '.join(matches)})"] if matches else []) + where
        sql = ("SELECT m.id, m.run_id, m.game, m.version, m.retain, m.avoid, m.next, r.model, r.pathway "
               "FROM summaries m JOIN runs r ON r.id = m.run_id"
               + (" WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY m.created_at DESC, m.id LIMIT ?")
        if parsed.empty and not f.labels:
            rows = []  # without words, run filters alone select steps, not every summary of the runs
        else:
            rows = conn.execute(sql, [*match_params, *params, limit + 1]).fetchall()
        more = len(rows) > limit
        notes = self._notes_on(conn, "summary_id", [r[0] for r in rows[:limit]])
        for sid, run_id, game, version, retain, avoid, nxt, model, pathway in rows[:limit]:
            own = notes.get(sid, [])
            fields = [(c, v) for c, v in (("retain", retain), ("avoid", avoid), ("next", nxt))
                      if f.searches("summary")] + [("note", f"{lab}: {note}") for lab, note in own
                                                   if f.searches("note")]
            lines = _lines(fields, terms) if terms else ()
            hits.append(SearchHit(kind="summary", summary_id=sid, version=version, run_id=run_id, game=game,
                                  model=model, pathway=pathway,
                                  lines=lines or (("retain", (retain or "").splitlines()[0][:LINE_CHARS]
                                                   if retain else ""),),
                                  labels=tuple(dict.fromkeys(lab for lab, _ in own))))
        # episodes through a note on them
        if not parsed.empty and f.searches("note") or (parsed.empty and f.labels):
            params = []
            where = _run_filters(f, "e.game", "e.run_id", "e.model", "e.pathway", params)
            if f.labels and "any" not in f.labels:
                where.append(_in("a.label", f.labels, params))
            cond = ["a.kind = 'episode'"]
            if not parsed.empty:
                cond.append("a.id IN (SELECT rowid FROM search_notes WHERE search_notes MATCH ?)")
                params.insert(0, parsed.fts)
            sql = ("SELECT DISTINCT e.id, e.run_id, e.game, e.model, e.pathway, e.phase FROM annotations a "
                   "JOIN episodes e ON e.id = a.episode_id WHERE " + " AND ".join(cond + where)
                   + " ORDER BY e.rowid DESC LIMIT ?")
            rows = conn.execute(sql, [*params, limit + 1]).fetchall()
            more = more or len(rows) > limit
            notes = self._notes_on(conn, "episode_id", [r[0] for r in rows[:limit]], kind="episode")
            for eid, run_id, game, model, pathway, phase in rows[:limit]:
                own = notes.get(eid, [])
                fields = [("note", f"{lab}: {note}") for lab, note in own]
                lines = _lines(fields, terms) if terms else tuple(fields[:LINES_PER_HIT])
                hits.append(SearchHit(kind="episode", episode_id=eid, run_id=run_id, game=game, model=model,
                                      pathway=pathway, phase=phase, lines=lines,
                                      labels=tuple(dict.fromkeys(lab for lab, _ in own))))
        return hits, more

    @staticmethod
    def _notes_on(conn: sqlite3.Connection, column: str, ids: Sequence[str], kind: str = "summary"
                  ) -> dict[str, list]:
        if not ids:
            return {}
        found: dict[str, list] = {}
        for key, label, note in conn.execute(
                f"SELECT {column}, label, note FROM annotations WHERE kind = ? AND {column} IN "
                f"(SELECT value FROM json_each(?)) ORDER BY id", (kind, json.dumps(list(ids)))):
            found.setdefault(key, []).append((label, note))
        return found

    # ------------------------------------------------------------------ pairs to compare

    def fork_pairs(self, game: Optional[str] = None) -> list[tuple[str, str]]:
        """(source, fork) of every forked episode (of one game)."""
        sql = "SELECT fork_of, id FROM episodes WHERE fork_of IS NOT NULL" + (" AND game = ?" if game else "")
        with self._db._reading("list forks") as conn:
            return [(a, b) for a, b in conn.execute(sql + " ORDER BY rowid", (game,) if game else ())]

    def episode_actions(self, episode_ids: Sequence[str]) -> dict[str, list[str]]:
        """The actions of each episode in step order (one query; no text but the actions)."""
        found: dict[str, list[str]] = {e: [] for e in episode_ids}
        with self._db._reading("read actions") as conn:
            for episode_id, action in conn.execute(
                    'SELECT episode_id, action FROM steps WHERE episode_id IN (SELECT value FROM json_each(?)) '
                    'ORDER BY episode_id, "index"', (json.dumps(list(found)),)):
                found[episode_id].append(action)
        return found

    def same_seed_episode(self, episode_id: str) -> Optional[str]:
        """A fork of the episode, else the newest other episode of its game, seed and mode, else None."""
        with self._db._reading("find an episode to compare with") as conn:
            fork = conn.execute("SELECT id FROM episodes WHERE fork_of = ? ORDER BY rowid LIMIT 1",
                                (episode_id,)).fetchone()
            if fork:
                return fork[0]
            row = conn.execute("SELECT o.id FROM episodes o JOIN episodes e ON e.id = ? WHERE o.game = e.game "
                               "AND o.seed = e.seed AND o.mode = e.mode AND o.id != e.id ORDER BY o.rowid DESC "
                               "LIMIT 1", (episode_id,)).fetchone()
        return row[0] if row else None

    def search_index_bytes(self) -> Optional[int]:
        """Bytes the index's tables take in the file (dbstat), None where dbstat is missing."""
        try:
            with self._db._reading("measure the search index") as conn:
                row = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'search\\_%' ESCAPE '\\'"
                                   ).fetchone()
        except StoreError:
            return None
        return int(row[0] or 0)


__all__ = ["SearchFilters", "SearchHit", "SearchResult", "Search", "MatchLine", "Term", "parse_query",
           "match_spans", "step_filters", "step_verdict", "VERDICTS", "ACTORS", "FIELDS", "DEFAULT_LIMIT"]
