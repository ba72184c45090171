"""The TASPO advantage hook (training/taspo.py) on a batch of episode rollouts, with the tiny random model as
pi_old: per-token advantages are A_i * w_it, w from taspo_weights of the shifts an independent scorer
measures; no aligned PI -> A_i; uniform credit -> plain GRPO; training PI and credit are stored."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

import pytest

from s3gym_tui.engine.credit import taspo_weights, token_weights
from s3gym_tui.engine.credit_pi import pi_text, with_pi
from s3gym_tui.engine.credit_score import HFScorer


@dataclass
class FakeStep:
    index: int
    observation: str
    prompt: list
    reply: str
    action: str
    feedback: str


@dataclass
class FakeRollout:  # the interface of group_rollouts.Rollout the hook reads
    game: str
    seed: int
    completion_ids: list = field(default_factory=list)
    env_mask: list = field(default_factory=list)
    turn_of_token: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    reward: Optional[float] = None
    episode_id: Optional[str] = None

    def turns(self, length):
        return (self.turn_of_token + [-1] * length)[:length]


def rollout(tok, seed, moves):
    r = FakeRollout("trust", seed)
    for t, a in enumerate(moves):
        prompt = [{"role": "system", "content": "You play the trust game."},
                  {"role": "user", "content": f"Round {t}. Your move?"}]
        reply = f"Answer: {a}, Score: 1"
        ids = tok(reply, add_special_tokens=False).input_ids
        game = tok(f"\nRound {t + 1}.", add_special_tokens=False).input_ids
        r.completion_ids += ids + game
        r.env_mask += [1] * len(ids) + [0] * len(game)
        r.turn_of_token += [t] * len(ids) + [-1] * len(game)
        r.steps.append(FakeStep(t, f"Round {t}.", prompt, reply, a, f"you played {a}"))
    return r


@pytest.fixture(scope="module")
def tiny(tiny_base):
    return HFScorer.load(tiny_base, name="tiny")


def batch(tok, seed=0):
    rollouts = [rollout(tok, seed, m) for m in (["C", "C", "D"], ["C", "D", "D"], ["D", "D", "C"], ["D", "C", "C"])]
    T = max(len(r.completion_ids) for r in rollouts) + 3  # padding at the end
    import torch

    mask = torch.tensor([[1 if e else 0 for e in (r.env_mask + [0] * T)[:T]] for r in rollouts])
    return rollouts, mask


def hook(tiny, **kw):
    from s3gym_tui.providers.scripted import pi_reply
    from s3gym_tui.training.taspo import TaspoAdvantages

    def analyze(model, messages, ctx):
        assert model == "scripted/trust" and ctx["task"] == "pi"
        return pi_reply(ctx["trajectories"])

    return TaspoAdvantages("trust", 4, tiny.model, tiny.tokenizer, analyzer="scripted/trust", analyze=analyze,
                           kappa=0.0, **kw)


def test_per_token_advantages_are_a_times_w(tiny):
    import torch

    rollouts, mask = batch(tiny.tokenizer)
    A = torch.tensor([1.0, 0.5, -0.7, -0.8])
    taspo = hook(tiny, tau=0.01)  # a sharp tanh: the tiny model's small shifts move credit visibly
    out = taspo(A, mask, rollouts)
    assert out.shape == mask.shape
    for row, r in enumerate(rollouts):
        turns = r.turns(mask.shape[1])
        # the independent path: the scorer's shifts of the reply text with and without P_it
        from s3gym_tui.engine.credit_pi import aligned_items, parse_items

        sources = [(f"row{k}", rollouts[k].steps) for k in (0, 1)]  # A > 0
        from s3gym_tui.providers.scripted import pi_reply

        items = parse_items(pi_reply([[[s.index, s.action] for s in rr] for _, rr in sources]), sources)
        aligned = aligned_items(items, r.steps, f"row{row}", ["row0", "row1"])
        shifts = [None if not its else
                  [h - p for h, p in zip(tiny.logprobs(with_pi(s.prompt, pi_text(its)), s.reply),
                                         tiny.logprobs(s.prompt, s.reply))]
                  for s, its in zip(r.steps, aligned)]
        w = taspo_weights(float(A[row]), shifts, 0.0, 0.01, 0.5)
        expected = [float(A[row]) * (w[t] if t >= 0 else 1.0) for t in turns]
        assert out[row].tolist() == pytest.approx(expected, abs=1e-5)
        assert taspo.last_weights[row] == pytest.approx(w, abs=1e-6)
    # the target's own success never counts as its evidence: row 0's PI comes from row 1 alone
    assert taspo.stats.analyzer_calls == 1 and taspo.stats.aligned_turns > 0
    assert taspo.stats.max_weight_gap > 0.05


def test_uniform_credit_is_plain_grpo(tiny):
    import torch

    rollouts, mask = batch(tiny.tokenizer)
    A = torch.tensor([1.0, 0.5, -0.7, -0.8])
    out = hook(tiny, credit="uniform")(A, mask, rollouts)
    assert torch.equal(out, A[:, None].expand_as(out))


def test_no_success_no_pi(tiny):
    import torch

    rollouts, mask = batch(tiny.tokenizer)
    A = torch.tensor([0.0, 0.0, 0.0, 0.0])
    taspo = hook(tiny)
    out = taspo(A, mask, rollouts)
    assert torch.equal(out, torch.zeros_like(out)) and taspo.stats.analyzer_calls == 0


def test_token_credit_weights_each_token(tiny):
    import torch

    rollouts, mask = batch(tiny.tokenizer)
    A = torch.tensor([1.0, 0.5, -0.7, -0.8])
    out = hook(tiny, credit="token")(A, mask, rollouts)
    row = 2
    ratios = [v / float(A[row]) for v, m in zip(out[row].tolist(), mask[row].tolist()) if m]
    assert all(0.5 - 1e-6 <= x <= 1.5 + 1e-6 for x in ratios)
    assert len({round(x, 6) for x in ratios}) > 2  # not one weight per turn
    assert token_weights  # (the function under the hook)


def test_off_trajectory_pi_comes_from_another_seed(tiny):
    import torch

    tok = tiny.tokenizer
    a, _ = batch(tok, seed=0)
    b, _ = batch(tok, seed=1)
    rollouts = a[:2] + b[:2]
    T = max(len(r.completion_ids) for r in rollouts) + 1
    mask = torch.tensor([[1 if e else 0 for e in (r.env_mask + [0] * T)[:T]] for r in rollouts])
    taspo = hook(tiny, pi_source="off-trajectory")
    taspo.G = 2
    seen = []
    inner = taspo.analyze
    taspo.analyze = lambda m, msgs, ctx: seen.append(ctx["seed"]) or inner(m, msgs, ctx)
    taspo(torch.tensor([1.0, -1.0, 1.0, -1.0]), mask, rollouts)
    assert seen == [0, 1] and taspo.stats.groups_with_pi == 2


def test_training_credit_is_stored_for_stored_rollouts(tiny, store):
    import torch

    from s3gym_tui.models import Episode, RunConfig, Step
    from s3gym_tui.store import audit

    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
    rollouts, mask = batch(tiny.tokenizer)
    for n, r in enumerate(rollouts):
        ep = store.episodes.add_episode(Episode(id=f"r{n}", run_id=run.id, game="trust", mode="explore", phase="explore",
                                                seed=0, index=n, model="p", pathway="none"),
                               [Step(episode_id=f"r{n}", index=s.index, observation=s.observation,
                                     prompt=json.dumps(s.prompt), reply=s.reply, action=s.action, self_score=1.0,
                                     reward=0.0, feedback=s.feedback, valid=True, terminated=False, truncated=False)
                                for s in r.steps])
        r.episode_id = ep.id
    taspo = hook(tiny, store=store, training_id="t-1")
    taspo(torch.tensor([1.0, 0.5, -0.7, -0.8]), mask, rollouts)
    from s3gym_tui.engine.credit import episode_credit

    credit = episode_credit(store, "r2")
    assert credit is not None and credit.advantage == pytest.approx(-0.7) and credit.group == ("r0", "r1", "r2", "r3")
    assert [a.weight for a in credit.actions] == pytest.approx(taspo.last_weights[2])
    assert any(a.items for a in credit.actions) and all(e in ("r0", "r1") for a in credit.actions
                                                       for i in a.items for e, _ in i.evidence)
    assert store.credit.pi_extraction(credit.extraction_id)["purpose"] == "training" and audit(store).ok
