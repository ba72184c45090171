"""Privileged information (PI) for credit per action (TASPO): sibling groups, who succeeded, the
analyzer's prompt and reply format, and alignment of PI items with a target's pre-action history.

- A sibling group is the finished episodes of one task: one game, mode and seed (episode-level GRPO
  rollouts, evaluation episodes of one seed across checkpoints, runs and pathways, forks).
- An episode's outcome is judged the way the training's reward is: `self` (default) is the agent's own
  judged return (the sum of the self-scores it stated; undefined without any), `verifier` the game's
  score (the oracle ablation). Successful = a positive outcome advantage in the group (above the
  group's mean), so a continuous game has successes too.
- The analyzer (any litellm model) reads the successful trajectories and writes one item a line:

      ITEM: <requirement g> | WHEN: <condition c> | CUES: <cue>; <cue> | EVIDENCE: T1#3, T2#0

  Cues make the condition checkable: `start` (no earlier move), `last:<action>` (the previous move),
  `after:<action>` (an earlier move), or a phrase that occurs in the state the agent sees. An item
  aligns with step t of the target only when every cue holds on the target's PRE-ACTION history (the
  observation at t, and the moves and feedback before t): never its action at t, later steps or its
  outcome. It must also cite a step of a successful source other than the target.
- `pi_text` merges the aligned items into the text P_it added to the context for scoring.

Model text is hostile: lines are parsed by pattern, cut to bounded lengths and stored as data; it is
shown only through textgate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from s3gym_tui.models import Episode, Step
    from s3gym_tui.store.store import Store

SUCCESS_RULES = ("self", "verifier")
MAX_ITEMS = 12
MAX_CUES = 4
MAX_TEXT = 240
MAX_CUE = 60
MAX_STEPS_SHOWN = 40  # per trajectory in the analyzer's prompt
OBSERVATION_CHARS = 400

_LINE = re.compile(r"ITEM:\s*(?P<g>[^|]+?)\s*\|\s*WHEN:\s*(?P<c>[^|]*?)\s*\|\s*CUES:\s*(?P<cues>[^|]*?)\s*\|\s*"
                   r"EVIDENCE:\s*(?P<ev>.*)$", re.IGNORECASE)
_EVIDENCE = re.compile(r"T(\d{1,3})\s*#\s*(\d{1,4})", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

ANALYZER_SYSTEM = (
    "You analyse successful attempts at one task of a text game and write what they got right, as "
    "rules another player could follow. Write at most {n} lines and nothing else, each exactly:\n"
    "ITEM: <a requirement, ordering or progress rule> | WHEN: <when it applies> | CUES: <cue>; <cue> | "
    "EVIDENCE: T<trajectory>#<step>, ...\n"
    "A cue is one of: start (before the first move), last:<move> (right after that move), "
    "after:<move> (any time after that move), or a short phrase that appears in the state when the rule "
    "applies. Cues may only use what a player sees before moving. EVIDENCE names the steps of the "
    "trajectories below that show the rule.")


@dataclass(frozen=True)
class ParsedItem:
    requirement: str
    condition: str
    cues: tuple[str, ...]
    evidence: tuple[tuple[str, int], ...]  # (episode id, step index), only steps that exist


def sibling_group(store: "Store", episode: "Episode") -> list["Episode"]:
    """The finished episodes of the episode's task (game, mode, seed), the episode itself included."""
    return store.credit.task_episodes(episode.game, episode.mode, episode.seed, include=episode.id)


def outcome(store: "Store", episode: "Episode", rule: str = "self",
            steps: Optional[Sequence["Step"]] = None) -> Optional[float]:
    """The episode's judged return: `self` = the sum of its stated self-scores (None without any),
    `verifier` = its score (the oracle ablation)."""
    if rule not in SUCCESS_RULES:
        raise ValueError(f"unknown success rule {rule!r}: one of {', '.join(SUCCESS_RULES)}")
    if rule == "verifier":
        return episode.score
    steps = store.episodes.steps(episode.id, include_prompt=False) if steps is None else steps
    scores = [s.self_score for s in steps if s.self_score is not None and s.self_score == s.self_score]
    return sum(scores) if scores else None


def clean(text: str, limit: int = MAX_TEXT) -> str:
    """One line of model text: control characters out, whitespace folded, cut to `limit`."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())[:limit]


def trajectory_text(number: int, steps: Sequence["Step"]) -> str:
    lines = [f"Trajectory T{number}:"]
    for s in steps[:MAX_STEPS_SHOWN]:
        obs = clean(s.observation, OBSERVATION_CHARS)
        lines.append(f"  T{number}#{s.index} state: {obs}")
        lines.append(f"  T{number}#{s.index} move: {clean(s.action, 120)} -> {clean(s.feedback, 160)}")
    if len(steps) > MAX_STEPS_SHOWN:
        lines.append(f"  ({len(steps) - MAX_STEPS_SHOWN} later steps left out)")
    return "\n".join(lines)


def analyzer_messages(game_rules: str, sources: Sequence[tuple[str, Sequence["Step"]]]) -> list[dict]:
    """The analyzer's prompt: the game's rules and the successful trajectories, numbered T1.. ."""
    body = "\n\n".join(trajectory_text(n, steps) for n, (_, steps) in enumerate(sources, 1))
    user = f"Game rules:\n{game_rules}\n\nSuccessful attempts at this task:\n\n{body}\n\nWrite the rules."
    return [{"role": "system", "content": ANALYZER_SYSTEM.format(n=MAX_ITEMS)},
            {"role": "user", "content": user}]


def parse_items(reply: str, sources: Sequence[tuple[str, Sequence["Step"]]]) -> list[ParsedItem]:
    """The items of an analyzer's reply; lines that do not fit the format are skipped, evidence naming a
    trajectory or step that does not exist is dropped, an item without any evidence left is dropped."""
    steps_of = {n: (ep, {s.index for s in steps}) for n, (ep, steps) in enumerate(sources, 1)}
    items: list[ParsedItem] = []
    for line in str(reply).splitlines():
        m = _LINE.search(line.strip())
        if m is None:
            continue
        evidence = []
        for t, k in _EVIDENCE.findall(m["ev"]):
            ep, indices = steps_of.get(int(t), (None, set()))
            if ep is not None and int(k) in indices and (ep, int(k)) not in evidence:
                evidence.append((ep, int(k)))
        cues = tuple(c for c in (clean(c, MAX_CUE) for c in m["cues"].split(";")) if c and c.lower() != "none")
        requirement = clean(m["g"])
        if evidence and requirement:
            items.append(ParsedItem(requirement, clean(m["c"]), cues[:MAX_CUES], tuple(evidence)))
        if len(items) >= MAX_ITEMS:
            break
    return items


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def cue_holds(cue: str, observation: str, earlier_actions: Sequence[str], earlier_feedback: Sequence[str]) -> bool:
    """Whether one cue holds on a pre-action history (see the module docstring)."""
    c = _norm(cue)
    moves = [_norm(a) for a in earlier_actions]
    if c == "start":
        return not moves
    if c.startswith("last:"):
        return bool(moves) and moves[-1] == c[5:].strip()
    if c.startswith("after:"):
        return c[6:].strip() in moves
    if not c:
        return True
    return c in _norm(observation) or any(c in _norm(f) for f in earlier_feedback[-1:])


def aligned_items(items: Iterable, steps: Sequence["Step"], target_id: str,
                  successful: Iterable[str]) -> list[list]:
    """Per step of the target, the items that align with its pre-action history. An item counts only
    with evidence from a successful source other than the target. `items` have `.cues`, `.evidence`."""
    sources = set(successful) - {target_id}
    usable = [i for i in items if any(ep in sources for ep, _ in i.evidence)]
    out: list[list] = []
    for t, step in enumerate(steps):
        earlier = steps[:t]
        actions = [s.action for s in earlier]
        feedback = [s.feedback for s in earlier]
        out.append([i for i in usable if all(cue_holds(c, step.observation, actions, feedback) for c in i.cues)])
    return out


def pi_text(items: Sequence) -> str:
    """P_it: the aligned items merged into one hint added to the context."""
    lines = [f"- {i.requirement}" + (f" (when {i.condition})" if i.condition else "") for i in items]
    return "Hints from successful attempts at this task:\n" + "\n".join(lines)


def with_pi(messages: Sequence[dict], hint: str) -> list[dict]:
    """The messages with P_it added at the end of the last user message (right before the reply, so a
    prompt cut from the left to fit a context keeps it); a user message is added when there is none."""
    messages = [dict(m) for m in messages]
    for m in reversed(messages):
        if m.get("role") == "user":
            m["content"] = f"{m.get('content') or ''}\n\n{hint}"
            return messages
    return [*messages, {"role": "user", "content": hint}]
