"""ASPIRE's update tool trains through the existing pathway (local backend, the tiny random base): an SFT
candidate frozen as its served model, with lineage and training link, judged on the hidden suite."""

from __future__ import annotations

import asyncio
import json

import pytest

from s3gym_tui.engine.aspire.budget import Budget
from s3gym_tui.engine.aspire.controller import Controller, Settings
from s3gym_tui.engine.aspire.goals import Goal, HiddenSuite, SuiteGame
from s3gym_tui.engine.aspire.operators import AgentTurn
from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store import Store

GOALS = (Goal("g", "Become better at working with a partner.",
              HiddenSuite("suite-x", (SuiteGame("trust", EVAL_SEED_BASE + 9000, 1, 1.0),))),)


class Plan:
    def __init__(self, method: str = "sft") -> None:
        self.method = method

    async def next_turn(self, briefing, decisions):
        ok = [d for d in decisions if d.outcome == "ok"]
        if not ok:
            return AgentTurn("practise", {"game": "trust", "episodes": 1, "seed": 0})
        if len(ok) == 1:
            run = json.loads(ok[0].result)["run"]
            return AgentTurn("update", {"action": self.method, "run": run, "threshold": -100})
        cand = json.loads(ok[1].result)["candidate"]
        return AgentTurn("submit", {"candidate": cand, "claim": "trained on my practice", "claimed_delta": 0.05})


# GRPO is the command's recipe, its format warm start included: started with the long tests (tests/conftest.py)
@pytest.mark.parametrize("method", ["sft", pytest.param("grpo", marks=pytest.mark.slow(minutes=3))])
def test_a_trained_candidate_through_the_training_pathway(tmp_path, tiny_base, method):
    with Store(tmp_path / "a.db") as store:
        aid = store.aspire.create_aspire_run(goal_id="g", goal_text=GOALS[0].text, model="scripted", protocol="final",
                                             budget=Budget().as_dict(),
                                             settings=Settings(player="scripted", step_cap=2, train_base=str(tiny_base)).__dict__).id
        final = asyncio.run(Controller(store, aid, Plan(method), GOALS).run_all())
        decisions = store.aspire.aspire_decisions(aid)
        cands = store.aspire.aspire_candidates(aid)
        scores = {s.purpose: s for s in store.aspire.hidden_scores(aid)}
        trainings = store.aspire.aspire_links(aid, "training")
        training = store.trainings.get_training(trainings[0].run_id) if trainings else None
    assert [(d.tool, d.outcome) for d in decisions] == [("practise", "ok"), ("update", "ok"), ("submit", "ok")], \
        [d.result for d in decisions]
    sft = cands[1]
    assert training is not None and training.method == method
    if method == "grpo":  # the agent's own judgement is the reward, never the verifier's
        assert training.settings["recipe"]["reward"] == "self"
    assert sft.kind == method and sft.parent_id == cands[0].id and sft.model.startswith("trained/")
    assert sft.frozen_ref == sft.model and trainings[0].run_id == sft.training_id
    assert final.final_candidate_id == sft.id and scores["final"].candidate_id == sft.id
    assert scores["final"].episodes == 1  # the trained model played the held-out seed
