"""The glass-box learner: it acts on its prompt alone, reads every game's prompts, learns from History and from
a summary's rules, and a person's edit of a rule changes what it does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import TurnRecord, build_messages, build_summary_messages, parse_summary
from s3gym_tui.providers.learner import PromptError, prompts, reply
from s3gym_tui.providers.learner.mind import RULES_PER_SECTION, summarise
from s3gym_tui.providers.learner.readers import reader
from s3gym_tui.store.summaries import MAX_EDIT_SECTION_CHARS
from tests.providers.learner_play import block, history, play, summary_tips, tips

GAMES = games.names()


@pytest.fixture(scope="module")
def histories() -> dict[str, str]:
    return {game: history(game, 3) for game in GAMES}


@pytest.mark.parametrize("game", GAMES)
def test_it_reads_the_engines_prompts_and_answers_with_a_legal_action(game, histories):
    env = games.make(game, "eval")
    env.reset(1_000_000)
    summary = summary_tips(game, None, histories[game])
    turns: list[TurnRecord] = []
    feedback = ""
    for _ in range(3):
        if env.done:
            break
        for hint in (None, histories[game], summary):
            messages = build_messages(env, hint, turns, feedback)
            parsed = prompts.parse(messages)
            assert parsed.rules == env.rules()
            assert parsed.observation == env.observation()
            assert parsed.hint == hint
            assert parsed.feedback == feedback
            assert [t.action for t in parsed.current] == [t.action for t in turns]
            answer = parse_reply(reply(game, messages))
            assert answer.action is not None and answer.self_score is not None
            probe = games.make(game, "eval")
            probe.restore(env.snapshot())
            assert probe.step(answer.action).valid, (game, answer.action)
        observation = env.observation()
        result = env.step(answer.action)
        turns.append(TurnRecord(observation, answer.action, answer.self_score, feedback))
        feedback = result.feedback


@pytest.mark.parametrize("game", ["chess", "minesweeper", "tetris", "snake", "pvz"])
def test_its_readers_see_what_the_game_shows(game):
    """The reading of the observation text agrees with the game's own structured view."""
    from s3gym_tui.providers.learner.readers import chess, minesweeper, pvz, snake, tetris

    env = games.make(game, "explore")
    env.reset(7)
    policy = games.reference_policy(game)
    for _ in range(4):
        if env.done:
            break
        env.step(policy.act(env.view()).action)
    view, text = env.view(), env.observation()
    if game == "chess":
        shown = chess.boards(text)
        assert len(shown) == len(view.boards)
        for got, board in zip(shown, view.boards):
            assert got == {ch: (r, c) for r, row in enumerate(board) for c, ch in enumerate(row) if ch != "."}
    elif game == "minesweeper":
        assert minesweeper._grid(text) == [list(row) for row in view.grid] or minesweeper._grid(text) == [
            list(row.replace(" ", "")) for row in view.grid]
    elif game == "tetris":
        rows = tetris.board(text)
        assert len(rows) == len(view.board) if hasattr(view, "board") else len(rows) > 0
        assert set(tetris.shapes(text)) == {0, 90, 180, 270}
    elif game == "snake":
        assert snake._grid(text) == list(view.grid)
    elif game == "pvz":
        _, zombies, sun = pvz.field(text)
        assert sun == view.sun
        assert len(zombies) == len(view.zombies)


def test_the_same_messages_give_the_same_reply_in_a_fresh_process(tmp_path, histories):
    env = games.make("chess", "eval")
    env.reset(1_000_001)
    messages = build_messages(env, histories["chess"], [], "")
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    code = ("import json,sys; from s3gym_tui.providers.learner import reply; "
            f"print(reply('chess', json.load(open({str(path)!r}))), end='')")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert fresh.stdout == reply("chess", messages)


def test_it_reads_nothing_but_the_messages(litellm_mod, histories):
    """The engine's per-request context (seed, actions, grammar) changes nothing: only the prompt counts."""
    env = games.make("trust", "eval")
    env.reset(1_000_000)
    messages = build_messages(env, histories["trust"], [], "")
    replies = set()
    for seed in (0, 1_000_000, 42):
        response = litellm_mod.completion(model="learner/trust", messages=messages, extra_body={"s3gym": {
            "task": "act", "game": "trust", "mode": "eval", "seed": seed, "actions": ["cheat"] * (seed % 3)}})
        replies.add(response.choices[0].message.content)
    assert len(replies) == 1


def test_history_evidence_decides_and_is_cited():
    """Trust: two previous episodes where cheating in the first round met an opponent who then cheated for
    ever, and collaborating met one who collaborated: the learner collaborates first and says where it saw it."""
    def episode(first: str, opponent: str) -> list[TurnRecord]:
        turns, feedback, you, them = [], "", [], []
        for k in range(1, 6):
            move = first if k == 1 else "collaborate"
            other = opponent if k > 1 else "collaborate"
            rows = "\n".join(f"  {i + 1}: {a} / {b}" for i, (a, b) in enumerate(zip(you, them))) or \
                "  (no rounds played yet)"
            turns.append(TurnRecord(f"Round: {k} of 10\nHistory (you / opponent):\n{rows}", move, 0.0, feedback))
            you.append(move)
            them.append(other)
            feedback = f"Round {k}: you {move}, the opponent chose to {other}."
        return turns

    hint = block(1, 0, episode("cheat", "cheat")) + "\n\n" + block(2, 1, episode("collaborate", "collaborate"))
    env = games.make("trust", "eval")
    env.reset(1_000_000)
    text = reply("trust", build_messages(env, hint, [], ""))
    assert parse_reply(text).action == "collaborate"
    assert "Previous episode 2, step 1" in text
    assert "exact match" in text


def test_a_persons_edit_of_a_rule_changes_the_next_action():
    env = games.make("trust", "eval")
    env.reset(1_000_000)
    edited = tips("[first round] cheat: judged +3 (reward +3, 4 times)", "(no rule yet)", "")
    assert parse_reply(reply("trust", build_messages(env, edited, [], ""))).action == "cheat"
    edited = tips("[first round] collaborate: judged +2.5", "[first round] cheat: judged -1", "")
    text = reply("trust", build_messages(env, edited, [], ""))
    assert parse_reply(text).action == "collaborate"
    assert "summary rule [first round] collaborate" in text


@pytest.mark.parametrize("game", GAMES)
def test_a_summary_is_lossy_readable_and_within_the_limits(game, histories):
    text = reply(game, build_summary_messages(games.make(game, "explore"), None, histories[game]))
    retain, avoid, nxt = parse_summary(text)
    for section in (retain, avoid):
        lines = [line for line in section.split("\n") if line.startswith("[")]
        assert len(lines) <= RULES_PER_SECTION
        assert len(section) <= MAX_EDIT_SECTION_CHARS
    assert "Covers previous episodes: 1-3." in nxt
    complete = summarise(reader(game), prompts.parse(build_summary_messages(games.make(game, "explore"), None,
                                                                            histories[game])), complete=True)
    assert complete.count("\n[") >= text.count("\n[")


@pytest.mark.parametrize("game", GAMES)
def test_a_summary_that_spells_out_all_of_historys_evidence_plays_as_history_does(game, histories):
    """The gap between the pathways comes from what a summary leaves out, not from reading rules: given every
    piece of History's evidence as rules, the learner makes History's every choice."""
    from s3gym_tui.providers.learner.mind import summarise

    full = summarise(reader(game), prompts.parse(build_summary_messages(games.make(game, "explore"), None,
                                                                        histories[game])), complete=True)
    retain, avoid, nxt = parse_summary(full)
    as_summary = tips(retain, avoid, nxt)
    for seed in (1_000_000, 1_000_001):
        with_history = play(game, "eval", seed, histories[game])
        with_summary = play(game, "eval", seed, as_summary)
        assert [t.action for t in with_summary[1]] == [t.action for t in with_history[1]]
        assert with_summary[0] == with_history[0]


def test_a_prompt_of_another_game_is_refused_in_one_line(litellm_mod):
    env = games.make("chess", "eval")
    env.reset(1_000_000)
    with pytest.raises(PromptError, match="learner/trust was given the rules of chess"):
        reply("trust", build_messages(env, None, [], ""))
    with pytest.raises(Exception) as caught:
        litellm_mod.completion(model="learner/trust", messages=build_messages(env, None, [], ""))
    assert "\n" not in str(caught.value).strip().split(" - ")[-1]


def test_without_experience_it_plays_the_same_prior_whatever_the_pathway():
    """The prior reads the step's own text only: an empty History and a summary with no rule that applies
    leave the choice where no experience leaves it."""
    env = games.make("snake", "eval")
    env.reset(1_000_002)
    base = parse_reply(reply("snake", build_messages(env, None, [], ""))).action
    unrelated = tips("[no such situation] move: judged +1", "(no rule yet)", "")
    assert parse_reply(reply("snake", build_messages(env, unrelated, [], ""))).action == base
