"""Credit per action computed from the store (engine/credit_compute.py): PI written by the scripted
analyzer through litellm (offline), stored with its prompt and raw reply; shifts scored with the tiny
random model with and without P_it; the held-out line for training PI."""

from __future__ import annotations

import json
import math

import pytest

from s3gym_tui.engine.credit import episode_credit, phi
from s3gym_tui.engine.credit_compute import CreditSettings, compute_credit
from s3gym_tui.engine.credit_pi import pi_text, with_pi
from s3gym_tui.engine.credit_score import HFScorer, scorer_for
from s3gym_tui.models import EVAL_SEED_BASE, Episode, RunConfig, Step
from s3gym_tui.store import LeakageError


def add_episode(store, run, moves, scores, *, seed=0, phase="explore", checkpoint=None, name=None):
    n = len(store.episodes.list()) if name is None else name
    ep = store.episodes.add_episode(Episode(id=f"ep{n}", run_id=run.id, game="trust", mode=phase, phase=phase, seed=seed,
                                            index=int(n) if str(n).isdigit() else 0, checkpoint=checkpoint,
                                            model="scripted/trust", pathway="none"))
    prompt = [{"role": "system", "content": "You play the trust game."}]
    for t, (a, s) in enumerate(zip(moves, scores)):
        messages = prompt + [{"role": "user", "content": f"Round {t}. Your move?"}]
        store.episodes.add_step(Step(episode_id=ep.id, index=t, observation=f"Round {t}.", prompt=json.dumps(messages),
                                     reply=f"Answer: {a}, Score: {s}", action=a, self_score=float(s), reward=0.0,
                                     feedback=f"you played {a}", valid=True, terminated=t == len(moves) - 1,
                                     truncated=False))
    return store.episodes.finish_episode(ep.id, score=float(sum(scores)))


@pytest.fixture
def group(store):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
    good = add_episode(store, run, ["C", "C", "D"], [2, 2, 2])
    good2 = add_episode(store, run, ["C", "D", "D"], [2, 1, 2])
    bad = add_episode(store, run, ["D", "D", "C"], [0, 0, 0])
    return run, good, good2, bad


def test_pi_stored_and_shifts_scored_with_and_without_pi(store, group, tiny_base):
    run, good, good2, bad = group
    scorer = HFScorer.load(tiny_base, name="tiny")
    settings = CreditSettings(analyzer="scripted/trust", kappa=0.0, eps_w=0.5)
    credit = compute_credit(store, bad.id, settings, scorer=scorer)
    assert credit.advantage is not None and credit.advantage < 0 and credit.reward == 0
    assert set(credit.group) == {good.id, good2.id, bad.id} and set(credit.successful) == {good.id, good2.id}
    ext = store.credit.pi_extraction(credit.extraction_id)
    assert "Trajectory T1" in json.loads(ext["prompt"])[1]["content"] and ext["reply"].startswith("ITEM: open with")
    assert credit.items and all(ep in (good.id, good2.id) for i in credit.items for ep, _ in i.evidence)
    # step 0 aligns with the opening item ('start'); step 1 follows the target's own 'D'
    assert [i.requirement for i in credit.actions[0].items] == ["open with 'C'"]
    assert all("after 'D'" in i.requirement for i in credit.actions[1].items)
    # the stored shift is the mean filtered per-token shift, recomputed here by hand
    steps = store.episodes.steps(bad.id)
    for action, step in zip(credit.actions, steps):
        if not action.items:
            assert action.shift is None and action.weight == 1.0
            continue
        messages = json.loads(store.prompts.prompt_of(step))
        plain = scorer.logprobs(messages, step.reply)
        hinted = scorer.logprobs(with_pi(messages, pi_text(action.items)), step.reply)
        assert len(plain) == len(hinted) > 0 and plain != hinted  # the hint changes the context
        d = sum(phi(h - p, 0.0) for h, p in zip(hinted, plain)) / len(plain)
        assert action.shift == pytest.approx(d, abs=1e-5)
    aligned = [a.weight for a in credit.actions if a.items]
    assert all(0.5 <= w <= 1.5 for w in aligned) and sum(aligned) / len(aligned) == pytest.approx(1.0)
    assert credit.scorer == "tiny"
    # a second computation reuses the stored extraction (the analyzer is asked once per group)
    again = compute_credit(store, good.id, settings, scorer=scorer,
                           analyze=lambda *a: pytest.fail("the analyzer was asked again"))
    assert again.extraction_id == credit.extraction_id and episode_credit(store, good.id) == again


def test_no_successful_sibling_means_uniform_credit(store, tiny_base):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
    only = add_episode(store, run, ["C", "D"], [1, 1])
    credit = compute_credit(store, only.id, CreditSettings(), scorer=HFScorer.load(tiny_base, name="tiny"),
                            analyze=lambda *a: pytest.fail("no analyzer without successful siblings"))
    assert credit.advantage == 0 and [a.weight for a in credit.actions] == [1.0, 1.0]
    assert "no successful sibling" in credit.note and credit.extraction_id is None


def test_undefined_outcome_gives_undefined_weights(store, group, tiny_base):
    run, good, *_ = group
    blind = add_episode(store, run, ["C"], [1])
    store.conn.execute("UPDATE steps SET self_score = NULL WHERE episode_id = ?", (blind.id,))
    credit = compute_credit(store, blind.id, CreditSettings(), scorer=HFScorer.load(tiny_base, name="tiny"))
    assert credit.advantage is None and [a.weight for a in credit.actions] == [None]
    assert "undefined" in credit.note


def test_training_pi_reads_exploration_episodes_only(store, group, tiny_base):
    run, good, good2, bad = group
    # an evaluation episode on an evaluation seed can never share the task; one stored by raw SQL on the
    # same seed (around the guards) must still not be read for training
    ev = add_episode(store, run, ["C", "C", "C"], [9, 9, 9], seed=EVAL_SEED_BASE, phase="eval", checkpoint=0,
                     name="eval0")
    store.conn.execute("UPDATE episodes SET seed = 0, mode = 'explore' WHERE id = ?", (ev.id,))
    scorer = HFScorer.load(tiny_base, name="tiny")
    credit = compute_credit(store, bad.id, CreditSettings(purpose="training", training_id="t1"), scorer=scorer)
    assert ev.id not in credit.group and ev.id not in credit.successful
    view = compute_credit(store, bad.id, CreditSettings(), scorer=scorer)
    assert ev.id in view.group  # reading an episode, every sibling counts
    with pytest.raises(LeakageError):
        compute_credit(store, ev.id, CreditSettings(purpose="training"), scorer=scorer)


def test_scripted_models_cannot_score_say_so_and_use_the_embedded_scorer(store, group):
    pytest.importorskip("llama_cpp")
    run, good, good2, bad = group
    from s3gym_tui.engine.credit_score import CannotScore

    with pytest.raises(CannotScore, match="cannot score a given completion"):
        scorer_for("scripted/trust")
    said: list[str] = []
    credit = compute_credit(store, bad.id, CreditSettings(kappa=0.0), say=said.append)
    assert len(said) == 1 and "scripted/trust cannot score" in said[0] and "local/smollm2-135m" in said[0]
    assert credit.scorer == "local/smollm2-135m" and said[0] in credit.note
    shifted = [a for a in credit.actions if a.items]
    assert shifted and all(a.shift is not None and math.isfinite(a.shift) for a in shifted)
    assert any(a.shift != 0 for a in shifted)  # the real model reads the hint


def test_facade_reports_progress_and_a_cancel_stores_no_credit(store, group, tiny_base):
    from s3gym_tui.engine import credit as facade

    run, good, good2, bad = group
    heard = []

    class Stop(Exception):
        pass

    def cancel_at_scoring(done, total, what):
        heard.append((done, total, what))
        if what.startswith("scoring"):
            raise Stop

    with pytest.raises(Stop):
        facade.compute_credit(store, bad.id, scorer=str(tiny_base), progress=cancel_at_scoring)
    assert heard[0][2] == "finding the siblings" and any("analyzer" in w for _, _, w in heard)
    assert heard[-1][:2] == (0, 3) and episode_credit(store, bad.id) is None  # nothing half-stored
    done = facade.compute_credit(store, bad.id, scorer=str(tiny_base), progress=lambda *a: heard.append(a),
                                 kappa=0.0)
    assert done.kappa == 0.0 and episode_credit(store, bad.id) == done


class LengthScorer:
    """A stand-in for the embedded scorer (minutes of llama.cpp on a loaded machine): a longer context makes
    every token likelier, so PI shifts are positive and differ by step."""

    name = "local/smollm2-135m"

    def logprobs(self, messages, completion):
        context = sum(len(str(m.get("content", ""))) for m in messages)
        return [-1.0 / (1 + context / 100) - k / 100 for k in range(len(completion.split()))]


def test_credit_of_a_grpo_rollout_episode_asks_a_model_that_can_analyse_and_says_which(tmp_path, capsys,
                                                                                      monkeypatch):
    """`s3gym credit` on a GRPO rollout episode failed with `bad trained model '…/policy'`: the default
    analyzer was the episode's own model, the training's policy while it learned, which nothing serves. It
    now asks the model of the run the training learned from (what TASPO training asks) and says so."""
    from s3gym_tui.cli import main
    from s3gym_tui.engine import credit_compute
    from s3gym_tui.store import Store
    from s3gym_tui.store.records import Training
    from s3gym_tui.training.group_rollouts import Rollout, RolloutStep
    from s3gym_tui.training.rollout_store import RolloutStore

    db = tmp_path / "g.db"
    with Store(db) as store:
        source = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
        store.trainings.add_training(Training(id="g1", method="grpo", games=("trust",), source_run=source.id))
        keep = RolloutStore(store, "g1", "trust", [3], 3, 1.0)
        episodes = []
        for k, (moves, score) in enumerate([("CCD", 6.0), ("CDD", 5.0), ("DDC", 0.0)]):
            steps = [RolloutStep(index=t, observation=f"Round {t}.", prompt=[{"role": "user", "content": f"Round {t}?"}],
                                 reply=f"Answer: {a}, Score: {score / 3}", action=a, self_score=score / 3, parsed=True,
                                 constrained=True, reward=0.0, feedback=f"you played {a}", valid=True,
                                 terminated=t == 2, truncated=False) for t, a in enumerate(moves)]
            episodes.append(keep(Rollout("trust", 3, k, True, [1, 2], steps=steps, score=score)))
        keep.close()
    target = episodes[2]
    assert target.model == "trained/g1/policy"
    monkeypatch.setattr(credit_compute, "scorer_for", lambda name: LengthScorer())
    code = main(["credit", target.id, "--json", "--db", str(db)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "bad trained model" not in captured.err
    said = " ".join(captured.err.split())
    assert (f"trained/g1/policy cannot be asked (a training's policy while it learned: no model serves it); the "
            f"analyzer is scripted/trust, the model of {source.id}, the run its training learned from") in said
    credit = json.loads(captured.out)
    assert credit["analyzer"] == "scripted/trust" and credit["items"]  # the PI was written
    with Store(db) as store:
        assert store.credit.pi_extraction(credit["extraction_id"])["analyzer"] == "scripted/trust"
