"""TASPO in training (issue 24): episode-level GRPO whose per-token advantages are A_i * w_it.

`TaspoAdvantages` is the advantage hook of episode-level GRPO (grpo_trainer.S3GymGRPOTrainer's
`token_advantages(advantages [B], loss_mask [B, T], rollouts)`): for each group of G rollouts of one
seed (rows in a row), with TRL's outcome advantages A_i (so success is judged exactly the way the
training's reward is: the frozen self-judge by default, the verifier in the oracle ablation):

1. the successful rollouts (A_i > 0) are the PI sources; a frozen analyzer (any litellm model: the run's
   model by default) writes PI items once per group (engine/credit_pi.py's format and checks);
2. for each target rollout, the items with evidence from a successful sibling OTHER than it whose
   condition holds on its pre-action history align with its turns;
3. the shift of each policy token of an aligned turn is log pi_old(token | prompt + P_it) -
   log pi_old(token | prompt), under the policy as it sampled (no gradient, dropout off), on the very
   token ids it sampled;
4. weights (engine.credit.taspo_weights / token_weights) scale A_i on the turn's tokens; the game's
   tokens between turns are masked out of the loss anyway and keep A_i.

Ablations: `credit` = action (the paper's), token (weights per token), uniform (w = 1: plain GRPO
through the same path); `pi_source` = siblings or off-trajectory (PI from successful rollouts of OTHER
seeds: this batch's other groups, else the previous batch's). With a store and stored rollout episodes
(`rollout.episode_id`), every extraction and credit is recorded (purpose `training`: exploration
episodes only, checked by the store and the audit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from s3gym_tui.engine import credit_pi as pi
from s3gym_tui.engine.credit_math import (CREDIT_MODES, DEFAULT_EPS_W, DEFAULT_KAPPA, DEFAULT_TAU, action_shifts,
                                          taspo_weights, token_weights)

PI_SOURCES = ("siblings", "off-trajectory")


@dataclass
class TaspoStats:
    groups: int = 0
    groups_with_pi: int = 0
    turns: int = 0
    aligned_turns: int = 0
    analyzer_calls: int = 0
    max_weight_gap: float = 0.0  # max |w - 1| seen


def _key(rollout: Any, row: int) -> str:
    return str(getattr(rollout, "episode_id", None) or f"row{row}")


class TaspoAdvantages:
    """Per-token TASPO advantages for a batch (see the module docstring)."""

    def __init__(self, game: str, num_generations: int, model: Any, tokenizer: Any, *, analyzer: str,
                 analyze: Optional[Callable[[str, list, dict], str]] = None, credit: str = "action",
                 kappa: float = DEFAULT_KAPPA, tau: float = DEFAULT_TAU, eps_w: float = DEFAULT_EPS_W,
                 pi_source: str = "siblings", store: Any = None, training_id: Optional[str] = None,
                 log: Callable[[str, float], None] = lambda name, value: None) -> None:
        if credit not in CREDIT_MODES:
            raise ValueError(f"unknown credit {credit!r}: one of {', '.join(CREDIT_MODES)}")
        if pi_source not in PI_SOURCES:
            raise ValueError(f"unknown PI source {pi_source!r}: one of {', '.join(PI_SOURCES)}")
        taspo_weights(1.0, [], kappa, tau, eps_w)  # the parameters' own checks
        if analyze is None:
            from s3gym_tui.engine.credit_compute import call_model as analyze
        self.game, self.G, self.model, self.tokenizer = game, num_generations, model, tokenizer
        self.analyzer, self.analyze, self.credit = analyzer, analyze, credit
        self.kappa, self.tau, self.eps_w, self.pi_source = kappa, tau, eps_w, pi_source
        self.store, self.training_id, self.log = store, training_id, log
        self.stats = TaspoStats()
        self.previous: list[tuple[int, int, str, Any]] = []  # (row, seed, key, rollout): the last batch's successes
        self.last_weights: list[list[Optional[float]]] = []  # per row of the last batch: w per turn

    # ------------------------------------------------------------------ scoring (pi_old)
    def _logprobs(self, messages: list, ids: list[int]) -> list[float]:
        import torch

        prompt = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True,
                                                    return_dict=False)
        if isinstance(prompt, dict) or hasattr(prompt, "input_ids"):
            prompt = prompt["input_ids"]
        prompt = list(prompt)
        device = next(self.model.parameters()).device
        x = torch.tensor([prompt + list(ids)], device=device)
        logits = self.model(input_ids=x).logits[0, len(prompt) - 1:-1].float()
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, torch.tensor(list(ids), device=device)[:, None])[:, 0].tolist()

    def _shifts(self, rollout: Any, turn: int, items: Sequence, T: int) -> list[float]:
        turns = rollout.turns(T)
        ids = [int(rollout.completion_ids[p]) for p in range(min(T, len(rollout.completion_ids)))
               if turns[p] == turn and rollout.env_mask[p]]
        if not ids:
            return []
        step = rollout.steps[turn]
        plain = [{"role": m["role"], "content": m["content"]} for m in step.prompt]
        hinted = pi.with_pi(plain, pi.pi_text(items))
        return [h - p for h, p in zip(self._logprobs(hinted, ids), self._logprobs(plain, ids))]

    # ------------------------------------------------------------------ PI
    def _items(self, sources: list[tuple[str, Any]], seed: int) -> tuple[list, Optional[str]]:
        """Parsed items (with .id for stored ones) from the analyzer, once per group."""
        if not sources:
            return [], None
        steps = [(key, r.steps) for key, r in sources]
        messages = pi.analyzer_messages(self._rules(seed), steps)
        ctx = {"task": "pi", "game": self.game, "mode": "explore", "seed": seed,
               "trajectories": [[[s.index, s.action] for s in r.steps] for _, r in sources]}
        reply = self.analyze(self.analyzer, messages, ctx)
        self.stats.analyzer_calls += 1
        items = pi.parse_items(reply, steps)
        ext = None
        keys = [k for k, _ in sources]
        if self.store is not None and all(not k.startswith("row") for k in keys):
            import json

            ext = self.store.credit.add_pi_extraction(
                game=self.game, mode="explore", seed=seed, episode_ids=keys, successful_ids=keys,
                success_rule="training-reward", analyzer=self.analyzer, prompt=json.dumps(messages), reply=reply,
                purpose="training", source=self.pi_source,
                items=[{"requirement": i.requirement, "condition": i.condition, "cues": i.cues,
                        "evidence": i.evidence} for i in items])
        return items, ext

    def _rules(self, seed: int) -> str:
        import s3gym_games as games

        try:
            return games.make(games.canonical(self.game), "explore").rules()
        except Exception:  # noqa: BLE001 - context only
            return f"(the rules of {self.game})"

    # ------------------------------------------------------------------ the hook
    def __call__(self, advantages: Any, loss_mask: Any, rollouts: Sequence[Any]) -> Any:
        import torch

        B, T = loss_mask.shape
        out = advantages.detach().float().unsqueeze(1).expand(-1, T).clone()
        self.last_weights = [[] for _ in range(B)]
        if self.credit == "uniform" or not rollouts or rollouts[0] is None:
            return out
        A = [float(a) for a in advantages.detach().float().tolist()]
        successes = [(row, r.seed, _key(r, row), r) for row, (a, r) in enumerate(zip(A, rollouts)) if a > 0]
        training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, B, self.G):
                    self._group(out, A, rollouts, range(start, min(B, start + self.G)), successes, T)
        finally:
            if training:
                self.model.train()
        self.previous = successes
        return out

    def _group(self, out: Any, A: list[float], rollouts: Sequence[Any], rows: range, successes: list, T: int) -> None:
        self.stats.groups += 1
        seed = rollouts[rows[0]].seed
        if self.pi_source == "siblings":
            sources = [(k, r) for row, s, k, r in successes if row in rows]
        else:  # off-trajectory: successes on other seeds (this batch, else the previous one)
            sources = [(k, r) for _, s, k, r in successes if s != seed] or \
                      [(k, r) for _, s, k, r in self.previous if s != seed]
        items, ext = self._items(sources, seed) if sources else ([], None)
        ids = [] if ext is None else [row["id"] for row in self.store.credit.pi_items_of(ext)]
        if items:
            self.stats.groups_with_pi += 1
        source_keys = [k for k, _ in sources]
        for row in rows:
            r = rollouts[row]
            key = _key(r, row)
            aligned = pi.aligned_items(items, r.steps, key, source_keys)
            self.stats.turns += len(r.steps)
            per_turn: list[Optional[list[float]]] = [None] * len(r.steps)
            for t, its in enumerate(aligned):
                if its:
                    self.stats.aligned_turns += 1
                    per_turn[t] = self._shifts(r, t, its, T)
            turns = r.turns(T)
            if self.credit == "token":
                tw = token_weights(A[row], per_turn, self.kappa, self.tau, self.eps_w)
                seen = [0] * len(r.steps)
                for p in range(T):
                    t = turns[p]
                    if t >= 0 and tw[t] is not None and r.env_mask[p] and seen[t] < len(tw[t]):
                        out[row, p] = A[row] * tw[t][seen[t]]
                        seen[t] += 1
                weights = [None if w is None else (sum(w) / len(w) if w else 1.0) for w in tw]
                weights = [1.0 if w is None else w for w in weights]
            else:
                weights = taspo_weights(A[row], per_turn, self.kappa, self.tau, self.eps_w)
                for p in range(T):
                    if turns[p] >= 0:
                        out[row, p] = A[row] * weights[turns[p]]
            self.last_weights[row] = list(weights)
            self.stats.max_weight_gap = max([self.stats.max_weight_gap, *(abs(w - 1) for w in weights)])
            if self.store is not None and getattr(r, "episode_id", None):
                item_id = {id(i): n for n, i in enumerate(items)}
                self.store.credit.add_episode_credit(
                    r.episode_id, extraction_id=ext, advantage=A[row], reward=getattr(r, "reward", None),
                    group_ids=[_key(rollouts[k], k) for k in rows], analyzer=self.analyzer, scorer="policy (pi_old)",
                    credit=self.credit, kappa=self.kappa, tau=self.tau, eps_w=self.eps_w,
                    training_id=self.training_id, note="" if items else "no PI for this group: uniform credit",
                    actions=[(s.index, w, d, [ids[item_id[id(i)]] for i in its if ids])
                             for s, w, d, its in zip(r.steps, weights, action_shifts(per_turn, self.kappa), aligned)])
        self.log("taspo_aligned_share", self.stats.aligned_turns / max(1, self.stats.turns))


def taspo_trainer(config: Any, *, analyzer: str, store: Any = None, training_id: Optional[str] = None,
                  analyze: Optional[Callable[[str, list, dict], str]] = None) -> type:
    """The trainer class of `s3gym train --method taspo`: a subclass of episode-level GRPO's trainer
    (grpo_trainer.S3GymGRPOTrainer) whose one advantage hook, `token_advantages`, is TASPO's (no TRL
    patching). pi_old is the trainer's own model (the policy as it sampled the batch), the tokenizer its
    processing class; `config` is the GrpoConfig (credit, kappa, tau, eps_w, pi_source)."""
    from s3gym_tui.training.grpo_trainer import S3GymGRPOTrainer

    class TaspoGRPOTrainer(S3GymGRPOTrainer):
        taspo: Optional[TaspoAdvantages] = None

        def token_advantages(self, advantages, loss_mask, rollouts):
            if self.taspo is None:
                game = next((r.game for r in rollouts if r is not None), "")
                self.taspo = TaspoAdvantages(
                    game, self.num_generations, self.model, self.processing_class, analyzer=analyzer,
                    analyze=analyze, credit=config.credit or "action", kappa=config.kappa, tau=config.tau,
                    eps_w=config.eps_w, pi_source=config.pi_source, store=store, training_id=training_id)
            return self.taspo(advantages, loss_mask, rollouts)

    return TaspoGRPOTrainer


__all__ = ["TaspoAdvantages", "TaspoStats", "taspo_trainer", "PI_SOURCES"]
