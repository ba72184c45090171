"""engine.compare: alignment, divergence, cumulative curves, context at a step, History-vs-Summary pairs."""

from __future__ import annotations

import asyncio
import json

import pytest

import s3gym_games as games
from s3gym_tui.engine.compare import (align, best_pairs, context_at, cumulative_rewards,
                                      cumulative_self_scores, first_divergence, hint_block,
                                      same_action, state_at, summary_diff)
from s3gym_games.prompt import HINT_HEADER
from s3gym_tui.engine.runner import ProtocolRunner, eval_episode_id
from s3gym_tui.engine.trial import try_summary
from s3gym_tui.models import Episode, RunConfig, Step
from s3gym_tui.store import Store


def make_steps(episode_id: str, actions, rewards=None, scores=None, game="trust", seed=1_000_000):
    """Steps whose observations and rewards come from really playing `actions`."""
    env = games.make(game, "eval")
    env.reset(seed)
    steps = []
    for i, action in enumerate(actions):
        obs = env.observation()
        result = env.step(action)
        steps.append(Step(episode_id=episode_id, index=i, observation=obs, prompt="", reply="",
                          action=action, self_score=None if scores is None else scores[i],
                          reward=result.reward if rewards is None else rewards[i],
                          feedback=result.feedback, valid=result.valid,
                          terminated=result.terminated, truncated=result.truncated))
    return steps


# ----- alignment -------------------------------------------------------------------------------
def test_the_same_move_is_the_games_rule_chess_letters_are_case_sensitive():
    assert same_action("Cheat", "cheat", "trust") and same_action(" cheat. ", "cheat")
    assert not same_action("A:(1,2)", "a:(1,2)", "chess")  # A and a are different pieces
    assert same_action("A:(1,2)", "A:(1,2).", "chess")
    a = make_steps("a", ["A:(1,2)"], game="chess")
    b = make_steps("b", ["a:(1,2)"], game="chess")
    assert first_divergence(a, b, "chess") == 0
    assert first_divergence(a, b) is None  # without the game: case ignored, as for any game



def test_align_rows_side_by_side_and_marks_equal_steps():
    a = make_steps("a", ["collaborate", "cheat", "cheat"], scores=[2, 0, 3])
    b = make_steps("b", ["collaborate", "collaborate"], scores=[1, None])
    rows = align(a, b)
    assert [r.index for r in rows] == [0, 1, 2]
    assert [r.equal for r in rows] == [True, False, False]
    assert (rows[0].action_a, rows[0].self_a, rows[0].action_b, rows[0].self_b) == ("collaborate", 2, "collaborate", 1)
    assert rows[1].reward_a == a[1].reward and rows[1].reward_b == b[1].reward
    assert rows[2].action_b is None and rows[2].self_b is None and rows[2].reward_b is None
    assert rows[2].action_a == "cheat"


def test_first_divergence():
    a = make_steps("a", ["collaborate", "cheat", "cheat"])
    assert first_divergence(a, make_steps("b", ["collaborate", "cheat", "cheat"])) is None
    assert first_divergence(a, make_steps("b", ["collaborate", "cheat", "collaborate"])) == 2
    assert first_divergence(a, make_steps("b", ["cheat"])) == 0
    # same prefix, one episode ended earlier: it diverges where the shorter one stops
    assert first_divergence(a, make_steps("b", ["collaborate", "cheat"])) == 2
    assert first_divergence([], []) is None
    # the games' normalisation (blanks, trailing period) and case do not make a difference
    assert same_action(" Collaborate.", "collaborate")
    assert not same_action("collaborate", None)


def test_cumulative_curves():
    a = make_steps("a", ["collaborate", "cheat", "cheat"], rewards=[2.0, 3.0, -1.0], scores=[1.0, None, 2.5])
    assert cumulative_rewards(a) == [2.0, 5.0, 4.0]
    assert cumulative_self_scores(a) == [1.0, 1.0, 3.5]
    assert cumulative_rewards([]) == []


def test_state_at_replays_the_stored_actions():
    actions = ["collaborate", "cheat", "collaborate", "cheat"]
    steps = make_steps("a", actions)
    episode = Episode(id="a", run_id=None, game="trust", mode="eval", phase="eval", seed=1_000_000,
                      index=0, model="m", pathway="none")
    for k in range(len(actions) + 1):
        expected = games.game_class("trust").replay("eval", 1_000_000, actions[:k])
        assert state_at(episode, steps, k).observation() == expected.observation()
    assert state_at(episode, steps, 99).observation() == state_at(episode, steps, 4).observation()
    assert state_at(episode, steps, 2).observation() == steps[2].observation


# ----- what the agent had in context -------------------------------------------------------------
@pytest.fixture(scope="module")
def pathway_runs(tmp_path_factory):
    path = tmp_path_factory.mktemp("cmp") / "runs.db"
    store = Store(path)
    ids = {}
    for pathway in ("history", "summary", "none"):
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway=pathway,
                                              explore_episodes=2, eval_every=2, eval_episodes=1),
                                    run_id=f"ctx-{pathway}")
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        ids[pathway] = run.id
    store.close()
    return path, ids


def test_context_at_history_episode_is_the_raw_history(pathway_runs):
    path, ids = pathway_runs
    with Store(path) as store:
        episode = store.episodes.get_episode(eval_episode_id(ids["history"], 2, 0))
        ctx = context_at(store, episode, 3)
        assert ctx.kind == "history" and ctx.step_index == 3 and ctx.omitted == 0
        assert ctx.text.count("--- Previous episode") == 2
        assert "Current episode so far" not in ctx.text and "Game rules:" not in ctx.text
        prompt = json.loads(store.prompts.step_prompt(episode.id, 3))[1]["content"]
        assert prompt.startswith(f"{HINT_HEADER}\n{ctx.text}\n\nCurrent episode so far:")
        # before any exploration there is no history at all
        first = store.episodes.get_episode(eval_episode_id(ids["history"], 0, 0))
        empty = context_at(store, first, 0)
        assert empty.kind == "none" and empty.text == "" and "no Hint Messages" in empty.note


def test_context_at_summary_episode_is_the_summary_tips(pathway_runs):
    path, ids = pathway_runs
    with Store(path) as store:
        episode = store.episodes.get_episode(eval_episode_id(ids["summary"], 2, 0))
        summary = store.summaries.get_summary(episode.summary_id)
        for index in (0, 5):
            ctx = context_at(store, episode, index)
            assert ctx.kind == "summary" and ctx.text == summary.as_tips()
        baseline = store.episodes.get_episode(eval_episode_id(ids["none"], 2, 0))
        assert context_at(store, baseline, 1).kind == "none"


def test_context_at_uses_a_neighbouring_prompt_and_shortens_long_history(pathway_runs, tmp_path):
    path, ids = pathway_runs
    with Store(path) as store:
        source = store.episodes.get_episode(eval_episode_id(ids["history"], 2, 0))
        steps = store.episodes.steps(source.id)
        copy = source.model_copy(update={"id": "copy", "run_id": None, "checkpoint": None,
                                         "history_episode_ids": (), "status": "running"})
        store.episodes.add_episode(copy)
        # step 0 was a human action (no prompt stored): the block comes from step 1's prompt
        store.episodes.add_steps([s.model_copy(update={"episode_id": "copy", "prompt": "" if s.index == 0 else
                                                       store.prompts.prompt_of(s)}) for s in steps])  # as sent
        ctx = context_at(store, store.episodes.get_episode("copy"), 0)
        assert ctx.step_index == 1 and "step 2" in ctx.note
        assert ctx.text.count("--- Previous episode") == 2
        short = context_at(store, store.episodes.get_episode("copy"), 4, max_chars=300)
        assert short.omitted > 0 and short.full_chars == len(ctx.text)
        assert "earlier characters of history not shown" in short.text
        assert short.text.rstrip().endswith(ctx.text.rstrip()[-100:])  # the newest part is kept


def test_hint_block_parsing():
    def prompt(user):
        return json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": user}])

    assert hint_block(prompt("Game rules:\nR\n\nStep 1")) is None
    assert hint_block(prompt(f"{HINT_HEADER}\ntips here\n\nGame rules:\nR")) == "tips here"
    assert hint_block(prompt(f"{HINT_HEADER}\nA\n\nCurrent episode so far:\nEnv: x\n\nGame rules:\nR"), "R") == "A"
    assert hint_block("not json") is None


# ----- History vs Summary pairs --------------------------------------------------------------------
def add_eval(store, run_id, pathway, x, j, score, model="scripted/trust", game="trust", finished=True):
    episode = Episode(id=f"{run_id}-c{x}-e{j}", run_id=run_id, game=game, mode="eval", phase="eval",
                      seed=1_000_000 + j, index=j, checkpoint=x, model=model, pathway=pathway)
    store.episodes.add_episode(episode)
    if finished:
        store.episodes.finish_episode(episode.id, score)
    return episode.id


@pytest.fixture
def pair_store(tmp_path):
    store = Store(tmp_path / "pairs.db")

    def run(run_id, pathway, model="scripted/trust", game="trust"):
        return store.runs.create_run(RunConfig(model=model, game=game, pathway=pathway), run_id=run_id).id

    h, s = run("h", "history"), run("s", "summary")
    add_eval(store, h, "history", 0, 0, 10.0), add_eval(store, s, "summary", 0, 0, 12.0)   # +2
    add_eval(store, h, "history", 0, 1, 15.0), add_eval(store, s, "summary", 0, 1, 5.0)    # -10
    add_eval(store, h, "history", 3, 0, 7.0), add_eval(store, s, "summary", 3, 0, 7.0)     # tie
    add_eval(store, h, "history", 3, 1, 1.0), add_eval(store, s, "summary", 3, 1, 6.0)     # +5
    add_eval(store, h, "history", 6, 0, 1.0)                                                # no partner
    add_eval(store, h, "history", 6, 1, 1.0), add_eval(store, s, "summary", 6, 1, 0, finished=False)
    # another model, another pathway, another game: never paired with the runs above
    o = run("other-model", "summary", model="scripted/other")
    add_eval(store, o, "summary", 0, 0, 100.0, model="scripted/other")
    n = run("none", "none")
    add_eval(store, n, "none", 0, 0, 100.0)
    sh, ss = run("sh", "history", "scripted/snake", "snake"), run("ss", "summary", "scripted/snake", "snake")
    add_eval(store, sh, "history", 0, 0, 3.0, "scripted/snake", "snake")
    add_eval(store, ss, "summary", 0, 0, 4.0, "scripted/snake", "snake")
    yield store
    store.close()


def test_best_pairs_sorted_by_absolute_difference(pair_store):
    pairs = best_pairs(pair_store)
    got = [(p.game, p.x, p.seed, p.history_score, p.summary_score, p.diff, p.winner) for p in pairs]
    assert got == [
        ("trust", 0, 1_000_001, 15.0, 5.0, -10.0, "history"),
        ("trust", 3, 1_000_001, 1.0, 6.0, 5.0, "summary"),
        ("trust", 0, 1_000_000, 10.0, 12.0, 2.0, "summary"),
        ("snake", 0, 1_000_000, 3.0, 4.0, 1.0, "summary"),
        ("trust", 3, 1_000_000, 7.0, 7.0, 0.0, "tie"),
    ]
    first = pairs[0]
    assert (first.history_run, first.summary_run) == ("h", "s")
    assert (first.history_episode, first.summary_episode) == ("h-c0-e1", "s-c0-e1")
    assert first.model == "scripted/trust"


def test_best_pairs_filters_and_limit(pair_store):
    assert [p.diff for p in best_pairs(pair_store, winner="history")] == [-10.0]
    assert [p.diff for p in best_pairs(pair_store, winner="summary")] == [5.0, 2.0, 1.0]
    assert [p.diff for p in best_pairs(pair_store, winner="tie")] == [0.0]
    assert [p.game for p in best_pairs(pair_store, game="snake")] == ["snake"]
    assert len(best_pairs(pair_store, limit=2)) == 2
    assert best_pairs(pair_store, game="chess") == []


def test_best_pairs_on_real_runs_share_seeds_and_checkpoints(pathway_runs):
    path, ids = pathway_runs
    with Store(path) as store:
        pairs = best_pairs(store)
        assert {(p.x, p.seed) for p in pairs} == {(0, 1_000_000), (2, 1_000_000)}
        for p in pairs:
            h, s = store.episodes.get_episode(p.history_episode), store.episodes.get_episode(p.summary_episode)
            assert (h.pathway, s.pathway) == ("history", "summary")
            assert (h.seed, h.checkpoint, h.score) == (p.seed, p.x, p.history_score)
            assert (s.seed, s.checkpoint, s.score) == (p.seed, p.x, p.summary_score)


# ----- summaries -----------------------------------------------------------------------------------
def test_summary_diff_shows_changed_lines(pair_store):
    old = pair_store.summaries.add_summary("s", "keep A", "avoid B", "try C")
    new = pair_store.summaries.edit_summary(old.id, "keep A", "avoid B and D", "try C", author="human:tester")
    lines = summary_diff(old, new)
    assert lines[0].startswith("--- v1 (model:scripted/trust)") and lines[1].startswith("+++ v2 (human:tester)")
    assert "-avoid B" in lines and "+avoid B and D" in lines
    assert " keep A" in lines  # context
    assert summary_diff(old, old) == []


def test_try_summary_plays_the_eval_seeds_with_that_version(pathway_runs):
    path, ids = pathway_runs
    with Store(path) as store:
        run = store.runs.get_run(ids["summary"])
        summary = store.summaries.list(run.id)[0]
        before = len(store.episodes.list(run.id))
        trial = asyncio.run(try_summary(store, run, summary, backoff_base_s=0))
        assert len(trial.episode_ids) == run.config.eval_episodes == len(trial.scores)
        for episode_id, score in zip(trial.episode_ids, trial.scores):
            episode = store.episodes.get_episode(episode_id)
            assert episode.run_id is None and episode.phase == "eval" and episode.summary_id == summary.id
            assert episode.seed == run.config.eval_seed(0) and episode.score == score
            prompt = json.loads(store.prompts.step_prompt(episode_id, 0))[1]["content"]
            assert prompt.startswith(f"{HINT_HEADER}\n{summary.as_tips()}")
        assert trial.mean == sum(trial.scores) / len(trial.scores)
        assert len(store.episodes.list(run.id)) == before  # the run itself is untouched
