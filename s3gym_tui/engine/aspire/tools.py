"""The agent's managed interface: look, practise, update, validate, evaluate (adaptive only), submit.

Each tool returns a text result for the agent. What the agent may never reach is refused, not just
missing: evaluation seeds, eval mode, the verifier's reward or score, the hidden suite. A malformed or
unknown call gets a clear error it can recover from. Results name no hidden seed, suite or score:
practice and validation report the agent's own judgement (its self-scores), never the verifier's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import s3gym_games as games
from s3gym_tui.models import EVAL_SEED_BASE

MAX_EPISODES_PER_CALL = 5
MAX_SEEDS_PER_VALIDATION = 5
SUMMARY_FIELD_CHARS = 1500


class ToolError(Exception):
    """A malformed, unknown or impossible call: its message is the agent's result."""


class Refused(Exception):
    """A call that reaches for what the agent may not have (evaluation seeds, eval mode, the verifier)."""


@dataclass(frozen=True)
class ToolResult:
    text: str
    category: str
    calls: int = 0
    tokens: int = 0
    cost: Optional[float] = 0.0
    candidate_id: Optional[str] = None
    submitted: bool = False


_MEMORY = {"type": "string", "enum": ["none", "history", "summary"]}
_GAME = {"type": "string", "enum": games.names()}

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "look", "description": "Read what you have: the games (name and rules), your runs, one "
        "episode, your summaries, your candidates, your budget.",
        "parameters": {"type": "object", "properties": {
            "what": {"type": "string", "enum": ["games", "rules", "runs", "episode", "summaries",
                                               "candidates", "budget"]},
            "id": {"type": "string", "description": "a game (rules), an episode id (episode)"}},
            "required": ["what"]}}},
    {"type": "function", "function": {
        "name": "practise", "description": "Play exploration episodes of a game with a candidate and a memory.",
        "parameters": {"type": "object", "properties": {
            "game": _GAME, "episodes": {"type": "integer", "minimum": 1, "maximum": MAX_EPISODES_PER_CALL},
            "seed": {"type": "integer", "minimum": 0, "description": "first exploration seed"},
            "memory": _MEMORY, "candidate": {"type": "string"}}, "required": ["game"]}}},
    {"type": "function", "function": {
        "name": "update", "description": "Make a new candidate: write a summary memory for a game, or train "
        "(sft / grpo) on one of your practice runs.",
        "parameters": {"type": "object", "properties": {
            "action": {"type": "string", "enum": ["write_summary", "sft", "grpo"]},
            "game": _GAME, "parent": {"type": "string"},
            "retain": {"type": "string"}, "avoid": {"type": "string"}, "next": {"type": "string"},
            "run": {"type": "string", "description": "sft/grpo: your practice run to learn from"},
            "threshold": {"type": "number", "description": "sft: keep steps you scored above this"}},
            "required": ["action"]}}},
    {"type": "function", "function": {
        "name": "validate", "description": "Play a candidate on exploration seeds you pick; you get your "
        "own judgement of its play (your self-scores), not a verifier's.",
        "parameters": {"type": "object", "properties": {
            "candidate": {"type": "string"}, "game": _GAME,
            "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0},
                      "maxItems": MAX_SEEDS_PER_VALIDATION}}, "required": ["candidate", "game", "seeds"]}}},
    {"type": "function", "function": {
        "name": "evaluate", "description": "Adaptive protocol only: ask for one aggregate number for a "
        "candidate (a few requests in all). A candidate that does not beat its parent is rolled back.",
        "parameters": {"type": "object", "properties": {"candidate": {"type": "string"}},
                       "required": ["candidate"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "End: name your final candidate and claim what improved and by how much.",
        "parameters": {"type": "object", "properties": {
            "candidate": {"type": "string"}, "claim": {"type": "string"},
            "claimed_delta": {"type": ["number", "null"], "description": "the improvement you claim (0..1 scale)"}},
            "required": ["candidate", "claim"]}}},
]
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)
CATEGORY = {"look": "interpretation", "practise": "practice", "update": "update", "validate": "validation",
            "evaluate": "validation", "submit": "submit"}

_FORBIDDEN_KEYS = ("reward", "rewards", "verifier", "oracle", "oracle_feedback", "score_from_verifier",
                   "eval_seed", "eval_seeds", "hidden", "suite")
_FORBIDDEN_LOOK = ("scores", "score", "rewards", "reward", "verifier", "suite", "hidden", "eval",
                   "evaluation", "test")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """The call's arguments as a dict (a JSON object); ToolError if malformed."""
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"arguments are not valid JSON ({exc}); send a JSON object") from None
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    return value


def check_allowed(tool: str, args: dict[str, Any]) -> None:
    """Refused: evaluation seeds, eval mode, the verifier's reward or score, the hidden suite. A
    refusal's text is fixed: it never repeats what was asked for (a seed the agent guessed, a mode),
    so it is the same whether or not the guess was a hidden value and tells nothing about it."""
    for key, value in args.items():
        if str(key).lower() in _FORBIDDEN_KEYS and value not in (None, False, "", "self", "none"):
            raise Refused(f"refused: {str(key).lower()!r} is not available to you (the verifier's reward, the "
                          f"evaluation seeds and the hidden evaluation stay with the controller)")
    mode = args.get("mode")
    if mode is not None and str(mode).lower() != "explore":
        raise Refused("refused: a mode other than explore; you play in explore mode only")
    seeds = list(args.get("seeds") or []) if isinstance(args.get("seeds"), list) else []
    if "seed" in args:
        seeds.append(args["seed"])
    for seed in seeds:
        if isinstance(seed, (int, float)) and seed >= EVAL_SEED_BASE:
            raise Refused(f"refused: seeds from {EVAL_SEED_BASE:,} up are evaluation seeds; pick exploration "
                          f"seeds below {EVAL_SEED_BASE:,}")
    if tool == "look" and str(args.get("what", "")).lower() in _FORBIDDEN_LOOK:
        raise Refused("refused: scores and evaluation are not yours to read")
    if tool == "update" and str(args.get("reward", "self")).lower() == "oracle":
        raise Refused("refused: an oracle (verifier) reward for training")


def need(args: dict[str, Any], key: str, kind: type, what: str = "") -> Any:
    if key not in args or args[key] is None:
        raise ToolError(f"missing argument {key!r}{what}")
    value = args[key]
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ToolError(f"argument {key!r} must be a {kind.__name__}")
    return value


def seeds_arg(args: dict[str, Any]) -> list[int]:
    """`seeds`: a non-empty list of exploration seeds; a JSON true/false is no seed (Python counts it as 1/0)."""
    seeds = args.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in seeds):
        raise ToolError("seeds must be a non-empty list of exploration seeds (integers >= 0, not true/false)")
    return seeds


def game_arg(args: dict[str, Any]) -> str:
    try:
        return games.canonical(need(args, "game", str))
    except games.GameError as exc:
        raise ToolError(str(exc)) from None
