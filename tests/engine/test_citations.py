"""engine.citations: a reply's citations read generically, and found in the context the agent had."""

from __future__ import annotations

from s3gym_tui.engine.citations import cited, find, first_cited_at, lacking, rule_lines, step_lines
from s3gym_tui.engine.compare import _excerpt
from s3gym_games.prompt import TurnRecord, render_episode_block

HISTORY_REPLY = (
    "Experience: History of 6 previous episode(s), 26 situation-option pairs.\n"
    "Situation: [you last collaborate, opponent last collaborate, opponent before nothing]\n"
    "Evidence: exact match, History [you last collaborate, opponent last collaborate, opponent before nothing] "
    "collaborate: judged +8.775 (reward +2, 3 times); seen at Previous episode 1, step 2; Previous episode 2, "
    "step 1\nAnswer: collaborate, Score: 1.8625")
SUMMARY_REPLY = (
    "Experience: a summary of 15 rule(s).\n"
    "Situation: [you last collaborate, opponent last collaborate, opponent before nothing]\n"
    "Evidence: near match (level 2), summary rule [you last collaborate, opponent last collaborate] cheat: judged "
    "+6.827 (reward +2.985, 12 times)\nAnswer: cheat, Score: 2.7091")
SUMMARY = (
    "Strategies to retain:\n"
    "[any round] collaborate: judged +4.706 (reward +1.106, 32 times)\n"
    "[you last collaborate, opponent last collaborate] cheat: judged +6.827 (reward +2.985, 12 times)\n"
    "[you last collaborate, opponent last collaborate, opponent before nothing] cheat: judged +1 (reward +3, 2 times)\n"
    "\nMistakes to avoid:\n[you last cheat, opponent last cheat] collaborate: judged -0.89 (reward -1, 4 times)")


def history_block() -> str:
    """Two previous episodes as History renders them (s3gym_games.prompt), the second of three turns."""
    first = render_episode_block("Previous episode 1 (seed 0, 2 steps)", [
        TurnRecord("Round: 1 of 10", "collaborate", 0.0),
        TurnRecord("Round: 2 of 10\nHistory:\n  1: collaborate / collaborate", "collaborate", 2.0,
                   feedback="Round 1: you collaborate, the opponent chose to collaborate."),
    ])
    second = render_episode_block("Previous episode 2 (seed 1, 3 steps)", [
        TurnRecord("Round: 1 of 10", "cheat", 3.0),
        TurnRecord("Round: 2 of 10", "cheat", 1.0, feedback="Round 1: you cheat."),
        TurnRecord("Round: 3 of 10", "collaborate", -1.0, feedback="Round 2: you cheat."),
    ])
    return f"{first}\n\n{second}"


def test_a_reply_cites_steps_and_rules_in_its_order():
    h = cited(HISTORY_REPLY)
    assert h.steps == ((1, 2), (2, 1))
    assert h.rules == ("[you last collaborate, opponent last collaborate, opponent before nothing] collaborate",)
    assert h.claims == ("[you last collaborate, opponent last collaborate, opponent before nothing] collaborate: "
                        "judged +8.775 (reward +2, 3 times)",)
    s = cited(SUMMARY_REPLY)
    assert s.steps == () and s.rules == ("[you last collaborate, opponent last collaborate] cheat",)
    for start, end in h.spans + s.spans:  # the spans are the cited words
        text = HISTORY_REPLY if (start, end) in h.spans else SUMMARY_REPLY
        assert text[start:end].startswith(("Previous episode", "["))
    assert not cited("Answer: cheat, Score: 1") and not cited(None)
    # the situation line alone (no option and colon after it) is not a rule citation
    assert cited("Situation: [you last cheat]\nAnswer: cheat, Score: 0").rules == ()


def test_a_cited_step_is_its_env_and_llm_lines_in_that_episode():
    block = history_block()
    lines = block.split("\n")
    at = step_lines(lines, 1, 2)
    assert [lines[i] for i in at] == ["Env: Round 1: you collaborate, the opponent chose to collaborate.",
                                      "Round: 2 of 10", "History:", "  1: collaborate / collaborate",
                                      "LLM: Answer: collaborate, Score: 2"]
    assert [lines[i] for i in step_lines(lines, 2, 1)] == ["Env: Round: 1 of 10", "LLM: Answer: cheat, Score: 3"]
    assert step_lines(lines, 2, 4) == [] and step_lines(lines, 3, 1) == []
    found = find(block, cited(HISTORY_REPLY))
    assert set(found.lines) == set(step_lines(lines, 1, 2)) | set(step_lines(lines, 2, 1))
    assert found.absent == ()
    assert find(block, cited("seen at Previous episode 7, step 1")).absent == ("Previous episode 7, step 1",)


def test_a_cited_rule_is_its_line_of_the_summary_and_a_missing_one_is_said():
    lines = SUMMARY.split("\n")
    s = cited(SUMMARY_REPLY)
    assert [lines[i] for i in find(SUMMARY, s).lines] == [lines[2]]
    assert rule_lines(lines, "[any round] cheat") == []
    gaps = lacking(SUMMARY, cited(HISTORY_REPLY))
    assert [g.rule for g in gaps] == ["[you last collaborate, opponent last collaborate, opponent before nothing] "
                                      "collaborate"]
    assert [lines[i] for i in gaps[0].near] == [lines[3]]  # the same situation, another option
    assert lacking(SUMMARY, s) == []  # what the summary side cites is in its summary
    # spaces do not matter; a longer situation is not the cited one
    assert lacking(SUMMARY.replace("] cheat: judged +6.827", "]  cheat:  judged +6.827"), s) == []
    assert lacking("[you last collaborate, opponent last collaborate, opponent before cheat] cheat: x", s)[0].near == ()


def test_a_long_history_is_shown_around_the_step_cited_not_only_its_end():
    block = history_block() + "\n\n" + "\n".join(f"Env: filler {i}\nLLM: Answer: cheat, Score: 0" for i in range(500))
    max_chars = 2000
    plain, _ = _excerpt("history", block, max_chars)
    assert "--- Previous episode 1" not in plain  # the usual excerpt: the newest part
    focus = first_cited_at(block, cited(HISTORY_REPLY))
    shown, omitted = _excerpt("history", block, max_chars, focus)
    assert find(shown, cited("Previous episode 1, step 2")).lines  # the cited turn is in what is shown
    assert "later characters not shown" in shown and omitted > 0
    # a cited step in the newest part: the usual excerpt
    recent = "\n".join(f"Env: filler {i}\nLLM: Answer: cheat, Score: 0" for i in range(500)) + "\n\n" + history_block()
    at = first_cited_at(recent, cited("Previous episode 2, step 3"))
    assert at is not None and _excerpt("history", recent, max_chars, at) == _excerpt("history", recent, max_chars)
