"""The embedded model as the ASPIRE agent: under the tool grammar every turn is a well-formed call (it may
still be a bad one: an unknown candidate, a refused seed), recorded and charged like any other."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.engine.aspire.budget import Budget
from s3gym_tui.engine.aspire.controller import Controller, Settings
from s3gym_tui.engine.aspire.operators import ModelOperator
from s3gym_tui.store import Store

from tests.aspire.test_aspire import CANARY_GOALS


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_embedded_agent_turns_are_well_formed_calls(tmp_path):
    with Store(tmp_path / "a.db") as store:
        aid = store.aspire.create_aspire_run(goal_id="canary", goal_text=CANARY_GOALS[0].text, model="local/smollm2-135m",
                                             protocol="final", budget=Budget(decisions=3).as_dict(),
                                             settings=Settings(player="scripted", step_cap=2, score_all=False).__dict__).id
        final = asyncio.run(Controller(store, aid, ModelOperator("local/smollm2-135m", max_tokens=200),
                                       CANARY_GOALS).run_all())
        decisions = store.aspire.aspire_decisions(aid)
    assert final.status == "finished" and len(decisions) >= 1
    for d in decisions:
        assert d.tool in ("look", "practise", "update", "validate", "evaluate", "submit"), d.reply
        assert "does not parse" not in d.result and "no tool call" not in d.result
        assert d.calls >= 1 and d.tokens_out > 0
