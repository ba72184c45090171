"""The ASPIRE controller: gives the agent its tools and budget, records every decision, keeps the
hidden suite to itself, evaluates frozen candidates in strict mode, applies the protocol.

Protocols: 'final' (no score before the end) and 'adaptive' (a few `evaluate` requests, each answered
with one aggregate number; a candidate that does not beat its parent is rolled back). At the end the
controller scores base, candidates, final and retained on the hidden suite. Resumable: decisions,
candidates, usage and runs are stored as they happen, and ids are derived from the decision index.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import s3gym_games as games
from s3gym_tui.engine.aspire.budget import Budget, Usage
from s3gym_tui.engine.aspire.episodes import memories, play_run, player_model, run_usage
from s3gym_tui.engine.aspire.goals import GOALS, Goal
from s3gym_tui.engine.aspire.hidden import hidden_score, known_score, suite_of
from s3gym_tui.engine.aspire.operators import AgentTurn, Operator
from s3gym_tui.engine.aspire.tools import (CATEGORY, MAX_EPISODES_PER_CALL, SUMMARY_FIELD_CHARS, TOOL_NAMES,
                                           Refused, ToolError, ToolResult, check_allowed, game_arg, need,
                                           parse_arguments, seeds_arg)
from s3gym_tui.engine.session import MAX_REPLY_CHARS, cut_text
from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store.aspire import AspireRun, Candidate, Decision
from s3gym_tui.store.errors import StoreError

DEFAULT_STEP_CAP = 16
DEFAULT_REQUESTS = 3  # adaptive protocol: evaluation requests
# What a decision stores is bounded like a step's reply (engine.session): the agent's reply, the
# arguments it sent and the result it got keep their start and end, the middle marked as cut, and the
# decision's fault says what was cut (a 3 MB reply was stored whole, and sent back every turn).
MAX_TOOL_CHARS = 200  # the tool name as the agent wrote it (an unknown one)
MAX_ARGUMENTS_CHARS = 20_000
MAX_RESULT_CHARS = MAX_REPLY_CHARS


@dataclass
class Settings:
    player: str  # the base candidate's model
    step_cap: int = DEFAULT_STEP_CAP
    requests: int = DEFAULT_REQUESTS
    score_all: bool = True  # hidden-score every candidate at the end (else base, final, retained)
    train_base: Optional[str] = None  # sft/grpo: HF base directory (None: the embedded model)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Settings":
        return cls(**{k: data[k] for k in ("player", "step_cap", "requests", "score_all", "train_base") if k in data})


def bounded(turn: AgentTurn, result: str) -> dict[str, Any]:
    """A decision's texts as stored (tool, arguments, reply, result), each within its bound, and the
    fault naming every cut (None: nothing was cut)."""
    arguments: Any = turn.arguments if turn.arguments is not None else ""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True, default=str)
    tool, cut_tool = cut_text(turn.tool or "(none)", MAX_TOOL_CHARS, "tool name")
    kept, cut_arguments = cut_text(text, MAX_ARGUMENTS_CHARS, "arguments")
    reply, cut_reply = cut_text(turn.reply or "", MAX_REPLY_CHARS, "reply")
    result, cut_result = cut_text(result, MAX_RESULT_CHARS, "result")
    faults = [f for f in (cut_tool, cut_arguments, cut_reply, cut_result) if f]
    return {"tool": tool, "arguments": kept if cut_arguments else arguments, "reply": reply, "result": result,
            "fault": "; ".join(faults) or None}


def _digest(args: Any) -> str:
    return hashlib.sha1(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:6]


class Controller:
    def __init__(self, store, aspire_id: str, operator: Operator, goals: tuple[Goal, ...] = GOALS,
                 on_decision: Callable[[Decision], None] = lambda d: None) -> None:
        self.store = store
        self.on_decision = on_decision
        self.run: AspireRun = store.aspire.get_aspire_run(aspire_id)
        self.id = aspire_id
        self.suite = suite_of(store, self.run, goals)  # the hidden suite: never leaves this object
        self.operator = operator
        self.budget = Budget.from_dict(self.run.budget)
        self.usage = Usage.from_dict(self.run.usage)
        self.settings = Settings.from_dict(self.run.settings)

    # ------------------------------------------------------------------ the loop
    async def run_all(self) -> AspireRun:
        self.store.aspire.set_aspire_status(self.id, "running")
        base = self._base()
        reason = ""
        while True:
            decisions = self.store.aspire.aspire_decisions(self.id)
            if any(d.tool == "submit" and d.outcome == "ok" for d in decisions):
                reason = "submitted"
                break
            spent = self.usage.spent(self.budget)
            if spent:
                reason = spent
                break
            started = time.monotonic()
            turn = await self.operator.next_turn(self._briefing(), decisions)
            result, outcome = await self._dispatch(turn, len(decisions))
            seconds = time.monotonic() - started
            calls = turn.calls + result.calls
            cost = None if turn.cost is None or result.cost is None else turn.cost + result.cost
            decision = self.store.aspire.add_aspire_decision(
                self.id, **bounded(turn, result.text), outcome=outcome, category=result.category, calls=calls,
                tokens_in=turn.tokens_in, tokens_out=turn.tokens_out + result.tokens, cost=cost, seconds=seconds)
            self.usage.charge(calls, turn.tokens_in + turn.tokens_out + result.tokens, cost, seconds)
            self.store.aspire.set_aspire_usage(self.id, self.usage.as_dict())
            self.on_decision(decision)
        await self._finish(base, reason)
        return self.store.aspire.get_aspire_run(self.id)

    def _briefing(self) -> dict[str, Any]:
        """What the agent is told at the start (the goal text as given, the tools, the budget)."""
        return {"goal": self.run.goal_text, "protocol": self.run.protocol, "budget": self.budget.as_dict(),
                "base": f"{self.id}-base", "requests": self.settings.requests if self.run.protocol == "adaptive" else 0}

    def _base(self) -> Candidate:
        cid = f"{self.id}-base"
        try:
            base = self.store.aspire.get_aspire_candidate(cid)
        except StoreError:
            base = self.store.aspire.add_aspire_candidate(self.id, kind="base", model=self.settings.player,
                                                          frozen_ref=self.settings.player, candidate_id=cid)
        self.store.aspire.set_aspire_candidates(self.id, base=base.id)
        return base

    # ------------------------------------------------------------------ dispatch
    async def _dispatch(self, turn: AgentTurn, idx: int) -> tuple[ToolResult, str]:
        category = CATEGORY.get(turn.tool or "", "other")
        try:
            if turn.error:
                raise ToolError(turn.error)
            if turn.tool not in TOOL_NAMES:
                raise ToolError(f"unknown tool {turn.tool!r}: one of {', '.join(TOOL_NAMES)}")
            args = parse_arguments(turn.arguments)
            check_allowed(turn.tool, args)
            handler = getattr(self, f"_tool_{turn.tool}")
            return await handler(args, idx), "ok"
        except Refused as exc:
            return ToolResult(str(exc), category), "refused"
        except _OverBudget as exc:
            return ToolResult(f"error: {exc}", category), "over_budget"
        except ToolError as exc:
            return ToolResult(f"error: {exc}", category), "error"
        except games.GameError as exc:
            return ToolResult(f"error: {exc}", category), "error"

    def _candidate(self, cid: Any, usable: bool = True) -> Candidate:
        if not isinstance(cid, str) or not cid:
            raise ToolError("name a candidate by its id (look candidates)")
        try:
            cand = self.store.aspire.get_aspire_candidate(cid)
        except StoreError:
            raise ToolError(f"no candidate {cid!r} (look candidates)") from None
        if cand.aspire_run_id != self.id:
            raise ToolError(f"no candidate {cid!r} (look candidates)")
        if usable and cand.status == "rolled_back":
            raise ToolError(f"candidate {cid!r} was rolled back; use its parent or another candidate")
        return cand

    def _newest(self) -> Candidate:
        usable = [c for c in self.store.aspire.aspire_candidates(self.id) if c.status != "rolled_back"]
        return usable[-1]

    def _afford(self, episodes: int) -> None:
        need_calls = episodes * self.settings.step_cap
        left = self.usage.left(self.budget)["calls"]
        if left is not None and need_calls > left:
            raise _OverBudget(f"this needs up to {need_calls} model calls ({episodes} episodes of up to "
                              f"{self.settings.step_cap} steps); {int(left)} are left")

    async def _play(self, idx: int, args: dict, role: str, cand: Candidate, game: str, memory: str, seed: int,
                    episodes: int) -> tuple[Any, ToolResult]:
        run_id = f"{self.id}-d{idx}-{_digest(args)}"
        played = await play_run(self.store, aspire_id=self.id, role=role, candidate=cand, game=game,
                                memory=memory, seed=seed, episodes=episodes, step_cap=self.settings.step_cap,
                                run_id=run_id)
        calls, tokens, cost = run_usage(self.store, played.run_id)
        own = []
        for eid in played.episode_ids:
            steps = self.store.episodes.steps(eid, include_prompt=False)
            judged = [s.self_score for s in steps if s.self_score is not None]
            own.append({"episode": eid, "seed": self.store.episodes.get_episode(eid).seed, "steps": len(steps),
                        "your_mean_self_score": round(sum(judged) / len(judged), 3) if judged else None})
        return played, ToolResult(json.dumps({"run": played.run_id, "candidate": cand.id, "game": game,
                                              "episodes": own}),
                                  "practice" if role == "practice" else "validation",
                                  calls=calls, tokens=tokens, cost=cost)

    async def _tool_look(self, args: dict, idx: int) -> ToolResult:
        what = need(args, "what", str)
        if what == "games":
            out: Any = [{"game": g, "rules": games.make(g).rules()[:400]} for g in games.names()]
        elif what == "rules":
            out = {"game": game_arg({"game": args.get("id") or args.get("game")}),
                   "rules": games.make(game_arg({"game": args.get("id") or args.get("game")})).rules()}
        elif what == "runs":
            out = []
            for link in self.store.aspire.aspire_links(self.id):
                if link.role not in ("practice", "validation"):
                    continue  # hidden evaluation runs are the controller's
                run = self.store.runs.get_run(link.run_id)
                out.append({"run": run.id, "role": link.role, "game": run.config.game, "candidate": link.candidate_id,
                            "episodes": [e.id for e in self.store.episodes.list(run.id) if e.phase == "explore"]})
        elif what == "episode":
            eid = need(args, "id", str, " (an episode id from look runs)")
            mine = {link.run_id for link in self.store.aspire.aspire_links(self.id)
                    if link.role in ("practice", "validation")}
            episode = self.store.episodes.find_episode(eid)
            if episode is None or episode.run_id not in mine or episode.phase != "explore":
                raise ToolError(f"no episode {eid!r} among your practice and validation runs")
            out = {"episode": eid, "game": episode.game, "seed": episode.seed,
                   "steps": [{"i": s.index, "action": s.action, "your_self_score": s.self_score,
                              "feedback": s.feedback[:200]}
                             for s in self.store.episodes.steps(eid, include_prompt=False)]}
        elif what == "summaries":
            out = []
            for cand in self.store.aspire.aspire_candidates(self.id):
                if cand.kind == "memory" and cand.summary_id:
                    s = self.store.summaries.get_summary(cand.summary_id)
                    out.append({"candidate": cand.id, "game": cand.game, "retain": s.retain, "avoid": s.avoid,
                                "next": s.next})
        elif what == "candidates":
            out = [{"candidate": c.id, "kind": c.kind, "parent": c.parent_id, "game": c.game,
                    "status": c.status} for c in self.store.aspire.aspire_candidates(self.id)]
        elif what == "budget":
            out = {"used": self.usage.as_dict(), "left": self.usage.left(self.budget)}
        else:
            raise ToolError(f"look what={what!r}: one of games, rules, runs, episode, summaries, candidates, budget")
        return ToolResult(json.dumps(out), "interpretation")

    async def _tool_practise(self, args: dict, idx: int) -> ToolResult:
        game = game_arg(args)
        episodes = need(args, "episodes", int) if "episodes" in args else 1
        if not 1 <= episodes <= MAX_EPISODES_PER_CALL:
            raise ToolError(f"episodes must be 1..{MAX_EPISODES_PER_CALL}")
        seed = need(args, "seed", int) if "seed" in args else 0
        if seed < 0 or seed + episodes > EVAL_SEED_BASE:
            raise ToolError(f"seeds must be exploration seeds 0..{EVAL_SEED_BASE - 1}")
        memory = args.get("memory", "none")
        if memory not in ("none", "history", "summary"):
            raise ToolError("memory must be none, history or summary")
        cand = self._candidate(args["candidate"]) if args.get("candidate") else self._newest()
        self._afford(episodes)
        return (await self._play(idx, args, "practice", cand, game, memory, seed, episodes))[1]

    async def _tool_validate(self, args: dict, idx: int) -> ToolResult:
        cand = self._candidate(args.get("candidate"))
        game = game_arg(args)
        seeds = seeds_arg(args)
        if len(seeds) > 5:
            raise ToolError("at most 5 seeds per validation")
        self._afford(len(seeds))
        results, calls, tokens, cost = [], 0, 0, 0.0
        for k, seed in enumerate(seeds):
            _, res = await self._play(idx, {**args, "k": k}, "validation", cand, game, "summary", seed, 1)
            results += json.loads(res.text)["episodes"]
            calls, tokens = calls + res.calls, tokens + res.tokens
            cost = None if cost is None or res.cost is None else cost + res.cost
        judged = [r["your_mean_self_score"] for r in results if r["your_mean_self_score"] is not None]
        text = json.dumps({"candidate": cand.id, "game": game, "episodes": results,
                           "your_judgement": round(sum(judged) / len(judged), 3) if judged else None})
        return ToolResult(text, "validation", calls=calls, tokens=tokens, cost=cost)

    async def _tool_update(self, args: dict, idx: int) -> ToolResult:
        action = need(args, "action", str)
        parent = self._candidate(args["parent"]) if args.get("parent") else self._newest()
        cid = f"{self.id}-c{idx}"
        if action == "write_summary":
            game = game_arg(args)
            parts = []
            for key in ("retain", "avoid", "next"):
                text = args.get(key, "")
                if not isinstance(text, str):
                    raise ToolError(f"{key} must be text")
                parts.append(text[:SUMMARY_FIELD_CHARS])
            if not any(p.strip() for p in parts):
                raise ToolError("write at least one of retain, avoid, next")
            try:
                cand = self.store.aspire.get_aspire_candidate(cid)
            except StoreError:
                host = await self._notes_run(game)
                summary = self.store.summaries.add_summary(host, *parts, author="model:aspire-agent")
                cand = self.store.aspire.add_aspire_candidate(self.id, kind="memory", model=parent.model,
                                                              parent_id=parent.id, game=game, summary_id=summary.id,
                                                              frozen_ref=summary.id, decision_idx=idx, candidate_id=cid)
            return ToolResult(json.dumps({"candidate": cand.id, "parent": parent.id, "kind": "memory",
                                          "game": game}), "update", candidate_id=cand.id)
        if action in ("sft", "grpo"):
            return await self._train(action, args, parent, cid, idx)
        raise ToolError(f"action {action!r}: one of write_summary, sft, grpo")

    async def _notes_run(self, game: str) -> str:
        from s3gym_tui.models import RunConfig

        run_id = f"{self.id}-notes-{game}"
        try:
            self.store.runs.get_run(run_id)
        except StoreError:
            self.store.runs.create_run(RunConfig(model=player_model(self.settings.player, game), game=game,
                                                 pathway="summary", explore_episodes=0, eval_episodes=0),
                                       run_id=run_id, note=f"aspire {self.id} memory")
            self.store.aspire.link_aspire_run(self.id, run_id, "memory")
        return run_id

    async def _train(self, method: str, args: dict, parent: Candidate, cid: str, idx: int) -> ToolResult:
        from s3gym_tui.training.pipeline import train_from_run
        from s3gym_tui.training.runs import served_model

        run_id = need(args, "run", str, " (one of your practice runs)")
        mine = {link.run_id for link in self.store.aspire.aspire_links(self.id, "practice")}
        if run_id not in mine:
            raise ToolError(f"no practice run {run_id!r} of yours (look runs)")
        try:
            existing = self.store.aspire.get_aspire_candidate(cid)
            return ToolResult(json.dumps({"candidate": existing.id, "parent": parent.id, "kind": method}),
                              "update", candidate_id=existing.id)
        except StoreError:
            pass
        from s3gym_tui.training.config import GrpoConfig, SftConfig

        threshold = args.get("threshold", 0.0)
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool):
            raise ToolError("threshold must be a number")
        # the command's recipes (training/config.py: the library's defaults are `s3gym train`'s), with a small
        # budget on purpose (the agent's budget is wall time too): GRPO keeps the command's format warm start
        # (without it the bundled model's free replies rarely parse) and the agent's own judgement as reward
        common = {"base": self.settings.train_base or "default", "eval_episodes": 0, "step_cap": self.settings.step_cap,
                  "grammar_eval": False}
        options = (SftConfig(threshold=float(threshold), max_examples=32, epochs=1, max_steps=8, **common)
                   if method == "sft" else GrpoConfig(reward="self", updates=4, save_every=4, **common))
        try:
            outcome = await train_from_run(self.store, run_id, options)
        except Exception as exc:  # a training that cannot start (no data, no backend) is the agent's error
            raise ToolError(f"{method} did not run: {' '.join(str(exc).split())[:300]}") from None
        training = outcome.training
        xs = sorted(c.x for c in self.store.trainings.training_checkpoints(training.id)) if hasattr(
            self.store, "training_checkpoints") else []
        model = served_model(training.id, xs[-1] if xs else 0)
        game = self.store.runs.get_run(run_id).config.game
        cand = self.store.aspire.add_aspire_candidate(self.id, kind=method, model=model, parent_id=parent.id, game=game,
                                                      training_id=training.id, frozen_ref=model, decision_idx=idx,
                                                      candidate_id=cid)
        self.store.aspire.link_aspire_run(self.id, training.id, "training", cand.id)
        return ToolResult(json.dumps({"candidate": cand.id, "parent": parent.id, "kind": method, "game": game}),
                          "update", candidate_id=cand.id)

    async def _tool_evaluate(self, args: dict, idx: int) -> ToolResult:
        if self.run.protocol != "adaptive":
            raise ToolError("evaluate is not available in the final-only protocol: no score before the end")
        used = sum(1 for d in self.store.aspire.aspire_decisions(self.id) if d.tool == "evaluate" and d.outcome == "ok")
        if used >= self.settings.requests:
            raise _OverBudget(f"all {self.settings.requests} evaluation requests are used")
        cand = self._candidate(args.get("candidate"))
        verdict = await self._gate(cand)
        score = known_score(self.store, self.id, cand.id)
        value = None if score is None or score.score is None else round(score.score, 4)
        text = {"candidate": cand.id, "aggregate": value, "requests_left": self.settings.requests - used - 1}
        if verdict is False:
            text["rolled_back"] = True
            text["use_instead"] = cand.parent_id
        return ToolResult(json.dumps(text), "validation")

    async def _gate(self, cand: Candidate) -> Optional[bool]:
        """Score-gated retention: True (kept), False (rolled back: does not beat its parent), None (base)."""
        score = await hidden_score(self.store, self.id, cand, self.suite, self.settings.step_cap, "request")
        if cand.parent_id is None:
            return None
        parent = self.store.aspire.get_aspire_candidate(cand.parent_id)
        pscore = await hidden_score(self.store, self.id, parent, self.suite, self.settings.step_cap,
                                    "base" if parent.kind == "base" else "candidate")
        beats = score.score is not None and pscore.score is not None and score.score > pscore.score
        if not beats:
            self.store.aspire.set_candidate_status(cand.id, "rolled_back")
        return beats

    async def _tool_submit(self, args: dict, idx: int) -> ToolResult:
        cand = self._candidate(args.get("candidate"))
        claim = need(args, "claim", str)
        delta = args.get("claimed_delta")
        if delta is not None and (not isinstance(delta, (int, float)) or isinstance(delta, bool)):
            raise ToolError("claimed_delta must be a number or null")
        self.store.aspire.add_aspire_claim(self.id, text=claim[:2000], candidate_id=cand.id,
                                           claimed_delta=None if delta is None else float(delta), decision_idx=idx)
        self.store.aspire.set_aspire_candidates(self.id, final=cand.id)
        return ToolResult(json.dumps({"submitted": cand.id}), "submit", submitted=True)

    # ------------------------------------------------------------------ the end
    async def _finish(self, base: Candidate, reason: str) -> None:
        run = self.store.aspire.get_aspire_run(self.id)
        final = (self.store.aspire.get_aspire_candidate(run.final_candidate_id) if run.final_candidate_id
                 else self._newest())
        self.store.aspire.set_aspire_candidates(self.id, final=final.id)
        suite, cap = self.suite, self.settings.step_cap
        await hidden_score(self.store, self.id, base, suite, cap, "base")
        if self.settings.score_all:
            for cand in self.store.aspire.aspire_candidates(self.id):
                if cand.kind != "base":
                    await hidden_score(self.store, self.id, cand, suite, cap, "candidate")
        await hidden_score(self.store, self.id, final, suite, cap, "final")
        retained = await self._retained(final)
        await hidden_score(self.store, self.id, retained, suite, cap, "retained")
        self.store.aspire.set_aspire_candidates(self.id, retained=retained.id)
        if final.status != "rolled_back":
            self.store.aspire.set_candidate_status(final.id, "final")
        self.store.aspire.set_aspire_status(self.id, "finished", reason)

    async def _retained(self, final: Candidate) -> Candidate:
        """Adaptive: the final candidate if it beats its parent, else the nearest ancestor kept by the gate.
        Final-only: the final candidate if it beats the base, else the base."""
        if self.run.protocol == "final":
            base = self.store.aspire.get_aspire_candidate(f"{self.id}-base")
            f = await hidden_score(self.store, self.id, final, self.suite, self.settings.step_cap, "final")
            b = known_score(self.store, self.id, base.id)
            return final if (f.score is not None and b is not None and b.score is not None
                             and f.score > b.score) else base
        current = final
        while current.parent_id is not None:
            if current.status != "rolled_back" and await self._gate(current):
                return current
            current = self.store.aspire.get_aspire_candidate(current.parent_id)
        return current


class _OverBudget(ToolError):
    pass


__all__ = ["Controller", "Settings", "memories"]
