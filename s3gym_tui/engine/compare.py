"""Comparing stored trajectories: step alignment, first divergence, cumulative curves, what the agent
had in context at a step, History-vs-Summary evaluation pairs, and summary version diffs.

Pure functions over stored records (no UI, no model calls): the Compare, Pairs and Summaries
screens only render what these return.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

import s3gym_games as games
from s3gym_games.base import clean_action
from s3gym_games.prompt import HINT_HEADER, HISTORY_CUT_MARK
from s3gym_tui.models import Episode, Run, Step, Summary
from s3gym_tui.engine.pathways import IN_CONTEXT

Winner = Literal["history", "summary", "tie"]
TIE_TOLERANCE = 1e-9
EXCERPT_CHARS = 6000  # how much of a Hint Messages block context_at returns
_CUT_MARK = re.compile(re.escape(HISTORY_CUT_MARK).replace(re.escape("{n}"), r"\d+"))

__all__ = [
    "AlignedRow", "StepContext", "EpisodePair", "Winner", "align", "first_divergence",
    "same_action", "cumulative", "cumulative_rewards", "cumulative_self_scores", "state_at",
    "hint_block", "context_at", "best_pairs", "summary_text", "summary_diff",
]


# ----- step alignment ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AlignedRow:
    """Step `index` of both episodes side by side (None on a side that has no such step)."""

    index: int
    action_a: Optional[str]
    self_a: Optional[float]
    reward_a: Optional[float]
    action_b: Optional[str]
    self_b: Optional[float]
    reward_b: Optional[float]
    equal: bool  # both sides have this step and took the same action


def same_action(a: Optional[str], b: Optional[str], game: Optional[str] = None) -> bool:
    """Actions are equal when both exist and name the same move: by the game's own rule when `game` is
    known (chess's letters are case-sensitive), else after the games' normalisation, ignoring case."""
    if a is None or b is None:
        return False
    if game is not None:
        try:
            return games.game_class(game).same_action(a, b)
        except games.GameError:
            pass
    return clean_action(a).casefold() == clean_action(b).casefold()


def align(steps_a: Sequence[Step], steps_b: Sequence[Step], game: Optional[str] = None) -> list[AlignedRow]:
    """One row per step index up to the longer episode (steps are matched by index; `game`: whose rule
    says when two actions are the same move)."""
    rows = []
    for i in range(max(len(steps_a), len(steps_b))):
        a = steps_a[i] if i < len(steps_a) else None
        b = steps_b[i] if i < len(steps_b) else None
        rows.append(AlignedRow(
            index=i,
            action_a=a.action if a else None, self_a=a.self_score if a else None,
            reward_a=a.reward if a else None,
            action_b=b.action if b else None, self_b=b.self_score if b else None,
            reward_b=b.reward if b else None,
            equal=same_action(a.action if a else None, b.action if b else None, game),
        ))
    return rows


def first_divergence(steps_a: Sequence[Step], steps_b: Sequence[Step], game: Optional[str] = None) -> Optional[int]:
    """The first step index where the actions differ (or one episode has ended and the other has
    not); None when both took exactly the same actions."""
    for row in align(steps_a, steps_b, game):
        if not row.equal:
            return row.index
    return None


def cumulative(values: Sequence[Optional[float]]) -> list[float]:
    """Running sums (a missing value counts as 0)."""
    total, out = 0.0, []
    for v in values:
        total += float(v or 0.0)
        out.append(total)
    return out


def cumulative_rewards(steps: Sequence[Step]) -> list[float]:
    """Cumulative verifier reward after each step."""
    return cumulative([s.reward for s in steps])


def cumulative_self_scores(steps: Sequence[Step]) -> list[float]:
    """Cumulative self-judged score after each step (missing scores count as 0)."""
    return cumulative([s.self_score for s in steps])


def state_at(episode: Episode, steps: Sequence[Step], k: int) -> games.Game:
    """The game as it was after the first `k` stored steps (replayed from seed and actions)."""
    k = max(0, min(k, len(steps)))
    return games.game_class(episode.game).replay(episode.mode, episode.seed,
                                                 [s.action for s in steps[:k]])


# ----- what the agent had in context ------------------------------------------------------------
@dataclass(frozen=True)
class StepContext:
    """The Hint Messages block the agent saw at one step (raw history or summary tips)."""

    kind: Literal["history", "summary", "none"]
    text: str  # the excerpt shown (may be shortened: see `omitted`)
    step_index: Optional[int]  # the step whose stored prompt it comes from (None: not from a prompt)
    full_chars: int = 0  # length of the whole block
    omitted: int = 0  # characters left out of the excerpt
    note: str = ""  # e.g. why there is nothing to show, or where it came from


def _user_text(prompt_json: str) -> Optional[str]:
    try:
        messages = json.loads(prompt_json)
    except (TypeError, ValueError):
        return None
    if not isinstance(messages, list):
        return None
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    texts = [u for u in users if isinstance(u, str)]
    return texts[-1] if texts else None


def hint_block(prompt_json: str, rules: Optional[str] = None) -> Optional[str]:
    """The text under `Hint Messages:` in a stored prompt (messages JSON), or None if it has none.

    The block ends where the current episode (`Current episode so far:`) or the step prompt
    (`Game rules:` followed by `rules`, when given) begins."""
    user = _user_text(prompt_json)
    if user is None or not user.startswith(HINT_HEADER):
        return None
    body = user[len(HINT_HEADER):].lstrip("\n")
    end = -1
    if rules:
        end = body.rfind(f"\n\nGame rules:\n{rules}")
    if end < 0:
        end = body.rfind("\n\nGame rules:\n")
    if end < 0:
        end = len(body)
    head = body[:end]
    current = head.rfind("\n\nCurrent episode so far:\n")
    if current >= 0:
        head = head[:current]
    return head


def _excerpt(kind: str, text: str, max_chars: int, focus: Optional[int] = None) -> tuple[str, int]:
    """Summaries from the top; raw history from the end (the newest episodes), keeping the cut mark;
    or, when `focus` (a character offset) would fall outside that, the part of the text around it."""
    if len(text) <= max_chars:
        return text, 0
    if focus is not None:
        margin = max_chars // 10  # the partial first line before the offset, or the cited turn after it
        inside = focus >= len(text) - max_chars + margin if kind == "history" else focus < max_chars - margin
        if not inside:
            return _window(text, max_chars, focus)
    if kind == "history":
        first_line = text.split("\n", 1)[0]
        mark = first_line if _CUT_MARK.fullmatch(first_line) else ""
        tail = text[-max_chars:]
        cut = tail.find("\n")  # start at a line boundary
        tail = tail[cut + 1:] if 0 <= cut < 200 else tail
        omitted = len(text) - len(tail)
        lead = f"{mark}\n" if mark else ""
        return f"{lead}[... {omitted:,} earlier characters of history not shown ...]\n{tail}", omitted
    head = text[:max_chars]
    omitted = len(text) - len(head)
    return f"{head}\n[... {omitted:,} more characters ...]", omitted


def _window(text: str, max_chars: int, focus: int) -> tuple[str, int]:
    """About `max_chars` of `text` from a little before `focus`, cut at line boundaries, the cuts said."""
    start = text.rfind("\n", 0, max(0, focus - max_chars // 5)) + 1
    end = text.find("\n", min(len(text), start + max_chars))
    end = len(text) if end < 0 else end
    head = f"[... {start:,} earlier characters not shown ...]\n" if start else ""
    tail = f"\n[... {len(text) - end:,} later characters not shown ...]" if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}", start + len(text) - end


def context_at(store, episode: Episode, index: int, max_chars: int = EXCERPT_CHARS,
               steps: Optional[Sequence[Step]] = None, focus=None) -> StepContext:
    """What the agent had under Hint Messages when it chose step `index` of `episode`.

    Read from the stored prompt of that step; a step with no stored prompt (a human action) uses
    the nearest earlier (else later) step of the episode that has one: the block is fixed for the
    whole episode. A summary episode without any stored prompt falls back to its summary version.
    `steps` (the episode's steps, prompts not needed) saves reading them again. `focus` (a reply's
    engine.citations.Citations): a long block is shown around the first line it cites, when the usual
    excerpt would leave that line out."""
    kind = episode.pathway if episode.pathway in IN_CONTEXT else "none"
    if steps is None:
        steps = store.episodes.steps(episode.id, include_prompt=False)
    if not steps:
        return StepContext("none", "", None, note="no steps stored")
    index = max(0, min(index, len(steps) - 1))
    rules = None
    try:
        rules = games.make(episode.game, episode.mode).rules()
    except Exception:  # an unknown game in an old store: parse without the rules anchor
        rules = None
    order = [index] + list(range(index - 1, -1, -1)) + list(range(index + 1, len(steps)))
    for i in order:
        prompt = store.prompts.step_prompt(episode.id, steps[i].index)
        if not prompt:
            continue
        block = hint_block(prompt, rules)
        note = "" if i == index else f"from the prompt of step {steps[i].index + 1}"
        if block is None:
            return StepContext("none", "", steps[i].index,
                               note=f"no Hint Messages in the prompt ({episode.pathway} pathway)")
        at = None
        if focus and len(block) > max_chars:
            from s3gym_tui.engine.citations import first_cited_at

            at = first_cited_at(block, focus)
        text, omitted = _excerpt(kind, block, max_chars, at)
        return StepContext(kind if kind != "none" else "history", text, steps[i].index,
                           len(block), omitted, note)
    if episode.pathway == "summary" and episode.summary_id:
        try:
            summary = store.summaries.get_summary(episode.summary_id)
        except Exception:
            summary = None
        if summary is not None:
            tips = summary.as_tips()
            text, omitted = _excerpt("summary", tips, max_chars)
            return StepContext("summary", text, None, len(tips), omitted,
                               note=f"summary v{summary.version} (no stored prompt)")
    return StepContext("none", "", None, note="no stored prompt for this episode")


# ----- History vs Summary evaluation pairs -----------------------------------------------------
@dataclass(frozen=True)
class EpisodePair:
    """The same evaluation episode (game, seed, checkpoint x) under History ICL and Summary Memory."""

    game: str
    model: str
    seed: int
    x: int
    history_run: str
    summary_run: str
    history_episode: str
    summary_episode: str
    history_score: float
    summary_score: float

    @property
    def diff(self) -> float:
        """Summary score minus History score."""
        return self.summary_score - self.history_score

    @property
    def winner(self) -> Winner:
        if abs(self.diff) < TIE_TOLERANCE:
            return "tie"
        return "summary" if self.diff > 0 else "history"


def _all_runs(store, page: int = 500) -> list[Run]:
    runs: list[Run] = []
    offset = 0
    while True:
        damaged: list[tuple[str, str]] = []  # a damaged run cannot be paired: skipped
        chunk = store.runs.list_runs(limit=page, offset=offset, damaged=damaged)
        runs.extend(chunk)
        offset += page
        if len(chunk) + len(damaged) < page:
            return runs


def best_pairs(store, limit: Optional[int] = 100, winner: Optional[Winner] = None,
               game: Optional[str] = None) -> list[EpisodePair]:
    """Pairs of finished evaluation episodes with the same game, seed and checkpoint x from a
    History run and a Summary run of the same model and game, sorted by |difference| (largest
    first; ties by game, model, x, seed). `winner` keeps only pairs one side won ('history',
    'summary') or tied; `game` keeps one game."""
    by_key: dict[tuple[str, str], dict[str, list[Run]]] = {}
    for run in _all_runs(store):
        cfg = run.config
        if cfg.pathway not in IN_CONTEXT:
            continue
        if game is not None and cfg.game != game:
            continue
        by_key.setdefault((cfg.game, cfg.model), {"history": [], "summary": []})[cfg.pathway].append(run)
    pairs: list[EpisodePair] = []
    cache: dict[str, dict[tuple[int, int], Episode]] = {}

    def evals(run: Run) -> dict[tuple[int, int], Episode]:
        if run.id not in cache:
            cache[run.id] = {(e.seed, e.checkpoint): e for e in store.episodes.list(run.id, phase="eval")
                             if e.status == "finished" and e.score is not None
                             and e.checkpoint is not None}
        return cache[run.id]

    for (g, model), sides in sorted(by_key.items()):
        for h_run in sides["history"]:
            for s_run in sides["summary"]:
                h_eps, s_eps = evals(h_run), evals(s_run)
                for key in sorted(h_eps.keys() & s_eps.keys()):
                    h, s = h_eps[key], s_eps[key]
                    pair = EpisodePair(g, model, key[0], key[1], h_run.id, s_run.id, h.id, s.id,
                                       float(h.score), float(s.score))
                    if winner is None or pair.winner == winner:
                        pairs.append(pair)
    pairs.sort(key=lambda p: (-abs(p.diff), p.game, p.model, p.x, p.seed, p.history_run, p.summary_run))
    return pairs if limit is None else pairs[:limit]


# ----- summary versions ---------------------------------------------------------------------------
def summary_text(summary: Summary) -> str:
    """A summary version as the lines a diff compares (its three labelled sections)."""
    return summary.as_tips()


def summary_diff(old: Summary, new: Summary, context: int = 3) -> list[str]:
    """A unified line diff from version `old` to version `new` (headers, hunks, +/- lines)."""
    return list(difflib.unified_diff(
        summary_text(old).splitlines(), summary_text(new).splitlines(),
        fromfile=f"v{old.version} ({old.author})", tofile=f"v{new.version} ({new.author})",
        n=context, lineterm=""))
