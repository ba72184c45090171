"""PI alignment (engine/credit_pi.py): by the target's pre-action history only, never its action, later
steps or outcome; evidence from a successful source other than the target; hostile analyzer text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from s3gym_tui.engine.credit import PiItem
from s3gym_tui.engine.credit_pi import aligned_items, cue_holds, parse_items, pi_text, with_pi
from s3gym_tui.models import Step

MOVES = ["C", "D", "wait", "left"]


def step(t: int, action: str, obs: str = "", feedback: str = "ok", reward: float = 0.0) -> Step:
    return Step(episode_id="target", index=t, observation=obs or f"round {t} board", prompt="[]",
                reply=f"Answer: {action}, Score: 1", action=action, self_score=1.0, reward=reward,
                feedback=feedback, valid=True, terminated=False, truncated=False)


ITEMS = [PiItem("x.0", "open with C", "first move", (("good", 0),), ("start",)),
         PiItem("x.1", "after C play D", "previous C", (("good", 1),), ("last:C",)),
         PiItem("x.2", "after D play wait", "D was played", (("good", 2),), ("after:D",)),
         PiItem("x.3", "when the bell rings", "bell", (("good", 3),), ("bell rings",)),
         PiItem("x.4", "only the target cites it", "", (("target", 0),), ())]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(MOVES), min_size=1, max_size=6), st.data())
def test_alignment_reads_only_the_pre_action_history(moves, data):
    steps = [step(t, a) for t, a in enumerate(moves)]
    base = aligned_items(ITEMS, steps, "target", ["good", "target"])
    t = data.draw(st.integers(min_value=0, max_value=len(moves) - 1))
    # change the action at t, its feedback and reward, and everything after t: alignment up to t holds
    changed = steps[:t] + [step(t, data.draw(st.sampled_from(MOVES)), steps[t].observation,
                                feedback="the bell rings", reward=99.0)]
    changed += [step(k, data.draw(st.sampled_from(MOVES)), feedback="the bell rings", reward=-5)
                for k in range(t + 1, len(moves) + 2)]
    again = aligned_items(ITEMS, changed, "target", ["good", "target"])
    assert [[i.id for i in a] for a in again[:t + 1]] == [[i.id for i in a] for a in base[:t + 1]]
    assert all("x.4" not in [i.id for i in a] for a in base)  # the target's own evidence does not count


def test_cues():
    assert cue_holds("start", "x", [], []) and not cue_holds("start", "x", ["C"], [])
    assert cue_holds("last:c", "x", ["D", "C"], []) and not cue_holds("last:D", "x", ["D", "C"], [])
    assert cue_holds("after:D", "x", ["D", "C"], [])
    assert cue_holds("Bell  Rings", "the bell rings now", [], [])
    assert cue_holds("bell rings", "", ["C"], ["the bell rings"])  # the previous move's feedback
    steps = [step(0, "C"), step(1, "D", feedback="the bell rings"), step(2, "C")]
    aligned = aligned_items(ITEMS, steps, "target", ["good"])
    assert [[i.id for i in a] for a in aligned] == [["x.0"], ["x.1"], ["x.2", "x.3"]]
    assert aligned_items(ITEMS, steps, "target", []) == [[], [], []]  # no successful source, no PI


def test_parse_items_keeps_only_wellformed_lines_and_real_evidence():
    sources = [("ep-a", [step(0, "C"), step(1, "D")]), ("ep-b", [step(0, "C")])]
    reply = ("Sure! Here are the rules:\n"
             "ITEM: open with C | WHEN: at the start | CUES: start | EVIDENCE: T1#0, T2#0, T9#0, T1#7\n"
             "ITEM: \x1b[31mred\x1b[0m rule | WHEN: always | CUES: none | EVIDENCE: T1#1\n"
             "ITEM: no evidence | WHEN: x | CUES: start | EVIDENCE: T5#1\n"
             "ITEM: broken line without fields\n")
    items = parse_items(reply, sources)
    assert [i.requirement for i in items] == ["open with C", "[31mred [0m rule"]
    assert items[0].evidence == (("ep-a", 0), ("ep-b", 0)) and items[1].cues == ()
    assert "\x1b" not in items[1].requirement
    many = "\n".join(f"ITEM: r{n} | WHEN: w | CUES: start | EVIDENCE: T1#0" for n in range(50))
    assert len(parse_items(many, sources)) == 12


def test_hint_goes_right_before_the_reply():
    hint = pi_text(ITEMS[:2])
    msgs = with_pi([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], hint)
    assert msgs[-1]["content"] == "u\n\n" + hint and msgs[0]["content"] == "s"
    assert "open with C (when first move)" in hint
