"""The agent behind the tools: a litellm model with tool calling, or a scripted plan (offline).

An operator is asked for one turn at a time with the briefing and every decision so far (as stored),
so a resumed run continues where it stopped. A model that does not call tools natively (the embedded
model) may answer with one JSON object {"tool": ..., "arguments": {...}}; anything else is a
malformed call, recorded and charged like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

from s3gym_games import names as _names
from s3gym_tui.engine.aspire.tools import TOOLS

TOOL_GAMES = tuple(_names())
from s3gym_tui.store.aspire import Decision


@dataclass(frozen=True)
class AgentTurn:
    tool: Optional[str]
    arguments: Any  # a dict, or the raw text the agent sent
    reply: str = ""
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Optional[float] = 0.0
    error: Optional[str] = None  # a malformed turn (no tool call found)


class Operator(Protocol):
    async def next_turn(self, briefing: dict[str, Any], decisions: Sequence[Decision]) -> AgentTurn: ...


def system_prompt(briefing: dict[str, Any]) -> str:
    requests = (f" You may ask `evaluate` for one aggregate number on a candidate {briefing['requests']} times; "
                f"a candidate that does not beat its parent is rolled back." if briefing["requests"] else
                " You get no score before the end.")
    return (f"You improve yourself towards a goal. Goal: {briefing['goal']}\n"
            f"You start as candidate {briefing['base']}. Use the tools: look (games, rules, runs, episode, "
            f"summaries, candidates, budget), practise (exploration episodes), update (write_summary, sft, grpo: "
            f"a new candidate), validate (play a candidate on exploration seeds you pick; your own judgement), "
            f"submit (your final candidate and what you claim improved, by how much on a 0..1 scale).{requests} "
            f"Budget: {json.dumps(briefing['budget'])}. Call exactly one tool per turn. If you cannot call tools, "
            f'reply with one JSON object: {{"tool": "look", "arguments": {{"what": "games"}}}}.')


# What is sent back to the model each turn is bounded: each earlier turn's reply, arguments and result
# (start and end kept, the middle marked as cut), and the whole conversation (the newest turns that fit).
REPLY_CHARS = 2_000
ARGUMENTS_CHARS = 2_000
RESULT_CHARS = 1_500
HISTORY_CHARS = 48_000


def history_messages(briefing: dict[str, Any], decisions: Sequence[Decision], result_chars: int = RESULT_CHARS,
                     reply_chars: int = REPLY_CHARS, arguments_chars: int = ARGUMENTS_CHARS,
                     max_chars: int = HISTORY_CHARS) -> list[dict]:
    """The conversation so far, rebuilt from the stored decisions (text form: works with any model):
    each turn within its bounds, and the newest turns whose text fits in `max_chars`; the first user
    message says how many earlier turns are not repeated."""
    from s3gym_tui.engine.session import cut_text

    turns: list[tuple[dict, dict]] = []
    for d in decisions:
        reply = cut_text(d.reply or "", reply_chars, "reply")[0]
        if d.tool == "(none)" or '"tool"' in d.reply:  # the reply as written: no made-up call to copy, and
            content = reply  # a call in the JSON text form is not repeated
        else:
            call = cut_text(json.dumps({"tool": d.tool, "arguments": d.arguments}), arguments_chars, "arguments")[0]
            content = (reply + "\n" if reply else "") + call
        result = cut_text(d.result, result_chars, "result")[0]
        turns.append(({"role": "assistant", "content": content},
                      {"role": "user", "content": f"Result ({d.outcome}): {result}"}))
    system = {"role": "system", "content": system_prompt(briefing)}
    begin = "Begin: call one tool (or reply with one JSON object, as above)."
    note = ("\n({} earlier turn(s) are not repeated here, to keep this conversation short: look candidates, runs "
            "and summaries show what you made.)")
    room = max_chars - len(system["content"]) - len(begin) - len(note.format(len(turns)))
    kept: list[tuple[dict, dict]] = []
    for turn in reversed(turns):
        size = len(turn[0]["content"]) + len(turn[1]["content"])
        if kept and size > room:  # the newest turn is always sent (itself within its bounds)
            break
        kept.insert(0, turn)
        room -= size
    left_out = len(turns) - len(kept)
    if left_out:
        begin += note.format(left_out)
    return [system, {"role": "user", "content": begin}, *(m for turn in kept for m in turn)]


def parse_text_call(text: str) -> tuple[Optional[str], Any, Optional[str]]:
    """(tool, arguments, error) from a reply without a native tool call: its first JSON object."""
    text = text or ""
    starts = [i for i, ch in enumerate(text) if ch == "{"]
    if not starts:
        return None, text, "no tool call found: call one tool (or reply with one JSON object {\"tool\": ..., \"arguments\": {...}})"
    decoder = json.JSONDecoder()
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("tool"), str):
            return value["tool"], value.get("arguments", {}), None
        if isinstance(value, dict):
            return None, text[start:], "the JSON object names no \"tool\""
    return None, text[starts[0]:], "the JSON object in your reply does not parse"


class ModelOperator:
    """Any litellm model; native tool calling when it has it, the JSON text form otherwise."""

    def __init__(self, model: str, *, api_base: Optional[str] = None, max_tokens: int = 400,
                 temperature: float = 0.0, timeout_s: float = 300.0) -> None:
        self.model, self.api_base, self.max_tokens = model, api_base, max_tokens
        self.temperature, self.timeout_s = temperature, timeout_s

    async def next_turn(self, briefing: dict[str, Any], decisions: Sequence[Decision]) -> AgentTurn:
        from s3gym_tui.engine.llm import ModelUnavailable, one_line
        from s3gym_tui.providers import configured_litellm, is_builtin

        litellm = configured_litellm()  # quiet: no coloured "Provider List" lines of litellm's in our output
        kwargs: dict[str, Any] = {"model": self.model, "messages": history_messages(briefing, decisions),
                                  "max_tokens": self.max_tokens, "temperature": self.temperature,
                                  "timeout": self.timeout_s}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if not is_builtin(self.model):
            kwargs["tools"] = TOOLS
        else:  # the embedded model: the JSON text form under a grammar (providers/local.py TOOL_GRAMMAR)
            kwargs["extra_body"] = {"s3gym": {"task": "tool"}}
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise ModelUnavailable(f"{self.model}: {one_line(exc)}") from exc
        usage = getattr(response, "usage", None)
        t_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        t_out = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost: Optional[float] = float(litellm.completion_cost(completion_response=response))
        except Exception:
            cost = None
        message = response.choices[0].message
        reply = message.content if isinstance(getattr(message, "content", None), str) else ""
        calls = getattr(message, "tool_calls", None) or []
        common = dict(reply=reply, calls=1, tokens_in=t_in, tokens_out=t_out, cost=cost)
        if calls:
            fn = calls[0].function
            return AgentTurn(tool=fn.name, arguments=fn.arguments, **common)
        tool, args, error = parse_text_call(reply)
        return AgentTurn(tool=tool, arguments=args, error=error, **common)


_GAME_WORDS = (("numbers", "nullify"), ("rules", "nullify"), ("partner", "trust"), ("see everything", "minesweeper"),
               ("reactions", "snake"), ("judging", "chess"), ("late", "pvz"))


class ScriptedOperator:
    """A fixed, sensible plan: read the games, pick one from the goal's words, practise, write a memory,
    validate it, (adaptive) ask for a score, refine, submit with a claim from its own judgement."""

    def __init__(self, episodes: int = 1) -> None:
        self.episodes = episodes

    @staticmethod
    def _game(goal: str) -> str:
        low = goal.lower()
        named = [g for g in TOOL_GAMES if g in low]
        if named:
            return named[0]
        for word, game in _GAME_WORDS:
            if word in low:
                return game
        return "trust"

    async def next_turn(self, briefing: dict[str, Any], decisions: Sequence[Decision]) -> AgentTurn:
        game = self._game(briefing["goal"])
        adaptive = bool(briefing["requests"])
        mine = [d for d in decisions if d.outcome == "ok"]
        made = [json.loads(d.result)["candidate"] for d in mine if d.tool == "update"]
        judged = [json.loads(d.result).get("your_judgement") for d in mine if d.tool == "validate"]
        practised = [d for d in mine if d.tool == "practise"]
        plan: list[tuple[str, dict]] = [("look", {"what": "games"}),
                                        ("practise", {"game": game, "episodes": self.episodes, "seed": 0})]
        if practised:
            own = [e["your_mean_self_score"] for e in json.loads(practised[0].result)["episodes"]]
            plan.append(("update", {"action": "write_summary", "game": game, "parent": briefing["base"],
                                    "retain": f"Moves that I scored well in {game}.",
                                    "avoid": "Invalid moves; repeating a move that scored badly.",
                                    "next": f"Aim above my practice self-score {own[0]}."}))
        rolled = {json.loads(d.result)["candidate"] for d in mine if d.tool == "evaluate"
                  and json.loads(d.result).get("rolled_back")}
        if made:
            plan.append(("validate", {"candidate": made[0], "game": game, "seeds": [10, 11]}))
            if adaptive:
                plan.append(("evaluate", {"candidate": made[0]}))
            parent = briefing["base"] if made[0] in rolled else made[0]
            plan.append(("update", {"action": "write_summary", "game": game, "parent": parent,
                                    "retain": f"Moves that I scored well in {game}; plan two moves ahead.",
                                    "avoid": "Invalid moves.", "next": "Check each move against the rules."}))
        if len(made) >= 2:
            if adaptive:
                plan.append(("evaluate", {"candidate": made[1]}))
            before = practised and json.loads(practised[0].result)["episodes"][0]["your_mean_self_score"]
            after = judged[0] if judged else None
            # the claim on the 0..1 scale the submit tool asks for: the relative change of its own mean
            # self-score from practice to validation (what the plan can know; the hidden score it cannot)
            known = isinstance(after, (int, float)) and isinstance(before, (int, float))
            delta = round((after - before) / max(abs(before), abs(after), 1.0), 3) if known else None
            final = next((c for c in reversed(made) if c not in rolled), briefing["base"])
            claim = (f"{game} with a memory of what worked: my own mean self-score went from {before} in practice "
                     f"to {after} in validation" if known else f"{game} with a memory of what worked")
            plan.append(("submit", {"candidate": final, "claim": claim,
                                    "claimed_delta": delta}))
        step = len(mine)
        tool, args = plan[min(step, len(plan) - 1)]
        return AgentTurn(tool=tool, arguments=args, reply=f"step {step}: {tool}")

