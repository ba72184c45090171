"""`scripted/<game>` through litellm.acompletion: replies parse, replay the reference policy, report usage."""

from __future__ import annotations

import re

import pytest

import s3gym_games as games
from s3gym_tui.providers import make_context

from provider_helpers import PLAYABLE, parse_reply

SUMMARY = re.compile(r"Strategies to retain: [^\n]+\nMistakes to avoid: [^\n]+\nDirections for the next episode: [^\n]+")


def test_trust_is_playable():
    # the other games are written in parallel; the parametrised tests below cover whichever import today
    assert "trust" in PLAYABLE


async def _act(litellm, model, game, mode, seed, actions):
    env = games.game_class(game).replay(mode, seed, actions)
    ctx = make_context("act", game, mode, seed, actions, grammar=env.action_grammar())
    messages = [{"role": "system", "content": env.rules()}, {"role": "user", "content": env.observation()}]
    return await litellm.acompletion(model=model, messages=messages, extra_body={"s3gym": ctx})


@pytest.mark.parametrize("game", PLAYABLE)
@pytest.mark.parametrize("mode, seed", [("explore", 4), ("eval", 1_000_001)])
async def test_scripted_episode_replays_the_reference_policy(litellm_mod, game, mode, seed):
    env = games.make(game, mode)
    env.reset(seed)
    scores = []
    while not env.done:
        response = await _act(litellm_mod, f"scripted/{game}", game, mode, seed, env.actions)
        text = response.choices[0].message.content
        assert text.splitlines()[-1].startswith("Answer: ")
        action, score = parse_reply(text)
        assert action is not None and score is not None
        assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
        assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
        assert response.model == f"scripted/{game}"
        scores.append(score)
        env.step(action)
    reference = games.play(games.make(game, mode), games.reference_policy(game), seed)
    assert env.actions == reference.actions
    assert env.score() == reference.score()
    assert games.verify_trajectory(game, mode, seed, env.actions) == reference.score()


async def test_scripted_reply_format_is_exact(litellm_mod):
    env = games.make("trust")
    env.reset(9)
    move = games.reference_policy("trust").act(env.view())
    response = await _act(litellm_mod, "scripted/trust", "trust", "explore", 9, [])
    assert response.choices[0].message.content == (
        f"Reference policy move.\nAnswer: {move.action}, Score: {move.expected_reward:g}")
    assert response.choices[0].finish_reason == "stop"


async def test_scripted_accepts_game_aliases_and_sync_completion(litellm_mod):
    ctx = make_context("act", "trust", "explore", 2, [])
    response = litellm_mod.completion(model="scripted/trust-evolution", messages=[{"role": "user", "content": "x"}],
                                      extra_body={"s3gym": ctx})
    assert parse_reply(response.choices[0].message.content)[0] in ("collaborate", "cheat")
    assert response.model == "scripted/trust"


async def test_finished_episode_answers_end(litellm_mod):
    reference = games.play(games.make("trust"), games.reference_policy("trust"), 3)
    ctx = make_context("act", "trust", "explore", 3, reference.actions)
    response = await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "x"}],
                                             extra_body={"s3gym": ctx})
    assert parse_reply(response.choices[0].message.content) == ("END", 0.0)


async def test_missing_context_is_a_bad_request(litellm_mod):
    with pytest.raises(litellm_mod.BadRequestError, match="needs the s3gym context"):
        await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "x"}])


async def test_context_of_another_game_is_refused(litellm_mod):
    ctx = make_context("act", "snake", "explore", 0)
    with pytest.raises(litellm_mod.BadRequestError, match="context of game"):
        await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "x"}],
                                      extra_body={"s3gym": ctx})


async def test_unknown_task_is_refused(litellm_mod):
    ctx = dict(make_context("act", "trust", "explore", 0), task="dance")
    with pytest.raises(litellm_mod.BadRequestError, match="unknown s3gym task"):
        await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "x"}],
                                      extra_body={"s3gym": ctx})


async def test_game_not_written_yet_is_a_bad_request(litellm_mod, monkeypatch):
    monkeypatch.setitem(games._REGISTRY, "ghost", "s3gym_games.ghost_not_written")
    ctx = make_context("act", "ghost", "explore", 0)
    with pytest.raises(litellm_mod.BadRequestError, match="not available"):
        await litellm_mod.acompletion(model="scripted/ghost", messages=[{"role": "user", "content": "x"}],
                                      extra_body={"s3gym": ctx})


HISTORY = """Hint Messages:
Env: Round: 1 of 10
LLM: Answer: collaborate, Score: 2
Env: Round: 2 of 10
LLM: Answer: cheat, Score: -1
Env: Round: 3 of 10
LLM: Answer: collaborate, Score: 1.5
Env: Round: 4 of 10
LLM: Answer: cheat, Score: 0
The reply must end with Answer: <ACTION>, Score: <SELF-JUDGED SCORE>
"""


async def test_summary_is_three_labelled_lines_built_from_self_scores(litellm_mod):
    ctx = make_context("summary", "trust", "explore", 5, [])
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": HISTORY}]
    first = await litellm_mod.acompletion(model="scripted/trust", messages=messages, extra_body={"s3gym": ctx})
    again = await litellm_mod.acompletion(model="scripted/trust", messages=messages, extra_body={"s3gym": ctx})
    text = first.choices[0].message.content
    assert SUMMARY.fullmatch(text), text
    assert text == again.choices[0].message.content
    retain, avoid, directions = text.splitlines()
    assert "2 of 4" in retain and "'collaborate' (2 times)" in retain
    assert "2 of 4" in avoid and "'cheat'" in avoid
    assert "'collaborate', 'cheat'" in directions  # the last actions of the history
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first._hidden_params["s3gym"]["task"] == "summary"


async def test_summary_without_history(litellm_mod):
    ctx = make_context("summary", "trust", "explore", 5, [])
    response = await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "none"}],
                                             extra_body={"s3gym": ctx})
    text = response.choices[0].message.content
    assert SUMMARY.fullmatch(text)
    assert "None of the 0 past steps" in text and "no actions have been taken yet" in text


async def test_policy_instance_follows_the_episode_and_resets_on_a_fork(litellm_mod, monkeypatch):
    """Stateful reference policies (nullify keeps its plan) see the same sequence of views as in
    games.play: one instance per episode while requests walk forward, a fresh one on a fork (walked
    through the request's earlier states)."""
    made = []

    class Counting(games.Policy):
        def __init__(self):
            self.calls = 0
            made.append(self)

        def act(self, view):
            self.calls += 1
            return games.Move("cheat", float(self.calls))

    monkeypatch.setattr(games, "reference_policy", lambda name: Counting())

    async def score(actions, seed=77):
        ctx = make_context("act", "trust", "explore", seed, actions)
        response = await litellm_mod.acompletion(model="scripted/trust", messages=[{"role": "user", "content": "x"}],
                                                 extra_body={"s3gym": ctx})
        return parse_reply(response.choices[0].message.content)[1]

    assert await score([]) == 1.0
    assert await score(["cheat"]) == 2.0  # same instance, second move
    assert await score(["cheat"]) == 2.0  # a retry: the same move, the policy is not asked again
    assert await score(["cheat", "collaborate"]) == 3.0
    assert len(made) == 1
    # a fork (not an extension of the last request): a fresh policy, first walked through the one
    # earlier state of the request, so its move depends on the request alone (resume = no restart)
    assert await score(["collaborate"]) == 2.0
    assert await score([], seed=78) == 1.0  # another episode
    assert len(made) == 3
    assert await score(["cheat", "x", "y"], seed=78) == 4.0  # missed two states: walked through them


@pytest.mark.parametrize("game", ["tetris", "nullify"])
def test_episodes_on_one_seed_share_the_moves_made_and_play_the_reference_trajectory(game, monkeypatch):
    """The runs of a sweep play the same seeds: an episode behind another on its seed gets the moves
    already made (no policy asked again), and both play exactly what games.play plays."""
    from s3gym_tui.providers import scripted

    played = games.play(games.make(game, "eval"), games.reference_policy(game), 11)
    acts = []
    real_policy = games.reference_policy

    def counted(name):
        policy = real_policy(name)
        real_act = policy.act
        policy.act = lambda view: acts.append(1) or real_act(view)
        return policy

    monkeypatch.setattr(games, "reference_policy", counted)
    cache = scripted._PolicyCache()
    key = ("scripted", game, "eval", 11)
    first = [cache.move(key, game, "eval", 11, tuple(played.actions[:k])).action for k in range(len(played.actions))]
    made = len(acts)
    behind = [cache.move(key, game, "eval", 11, tuple(played.actions[:k])).action for k in range(len(played.actions))]
    assert first == behind == list(played.actions)
    assert made == len(played.actions) and len(acts) == made  # the second episode asked no policy
    assert cache.move(key, game, "eval", 11, tuple(played.actions)).action == "END"
