"""The `pi` task of the built-in providers (PI for credit per action, engine/credit_pi.py): the scripted
analyzer's deterministic items and the embedded model's grammar, whose evidence can only name real steps."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.credit_pi import parse_items
from s3gym_tui.models import Step
from s3gym_tui.providers import local
from s3gym_tui.providers.scripted import pi_reply


def _step(t, a):
    return Step(episode_id="x", index=t, observation=f"Round {t}.", prompt="[]", reply=f"Answer: {a}, Score: 1",
                action=a, self_score=1.0, reward=0.0, feedback="ok", valid=True, terminated=False, truncated=False)


def test_scripted_analyzer_items_parse_and_cite_real_steps():
    sources = [("a", [_step(0, "C"), _step(1, "C"), _step(2, "D")]), ("b", [_step(0, "C"), _step(1, "D")])]
    items = parse_items(pi_reply([[[s.index, s.action] for s in steps] for _, steps in sources]), sources)
    assert items[0].requirement == "open with 'C'" and items[0].cues == ("start",)
    assert items[0].evidence == (("a", 0), ("b", 0))
    assert {i.requirement for i in items[1:]} == {"after 'C', play 'C'", "after 'C', play 'D'"}
    assert pi_reply([]) == ""


def test_embedded_pi_grammar_names_only_real_steps_and_llama_cpp_accepts_it():
    llama_cpp = pytest.importorskip("llama_cpp")
    ctx = {"task": "pi", "trajectories": [[[0, "C"], [1, "D"]], [[0, "C"]]]}
    grammar = local.LocalLLM().request_plan(ctx, {})["grammar"]
    assert grammar.endswith('ev ::= "T1#0" | "T1#1" | "T2#0"\n')
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
    llama_cpp.LlamaGrammar.from_string(local.PI_GRAMMAR, verbose=False)
    assert local.LocalLLM().request_plan({"task": "pi"}, {})["grammar"] == local.PI_GRAMMAR
