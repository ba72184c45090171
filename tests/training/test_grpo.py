"""GRPO experts on the tiny base: the games as TRL environments with the engine's own prompts, on-policy
rollouts through the real games on exploration seeds only, the three reward sources (self-judged by a
frozen judge, stated, oracle) wired to the right numbers, and the whole expert pathway with `--method grpo`."""

from __future__ import annotations

import json

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_games.prompt import SYSTEM_PROMPT, build_messages
from s3gym_tui.models import EVAL_SEED_BASE, RunConfig
from s3gym_tui.store import Store, audit
from s3gym_games.trl_env import TOOL_TEMPLATE, GameEnvironment, completion_text, prompt_row, step_outcome
from s3gym_tui.training.rewards import judge_messages, make_reward
from s3gym_tui.training.rollouts import StateStream
from train_helpers import add_trust_episode, trust_run

pytest.importorskip("trl")

SPECS = [("collaborate", 2.0, None), ("cheat", 3.0, None), ("collaborate", -1.0, None)]


def _reply(action: str, score: float = 1.0) -> list[dict]:
    return [{"role": "assistant", "content": f"Let me think.\nAnswer: {action}, Score: {score:g}"}]


def test_the_environment_prompt_is_exactly_the_engines(store):
    """A stored step's prompt (built by the engine) equals what the environment builds for that state."""
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS)
    steps = store.episodes.steps(episode.id)
    env = GameEnvironment()
    for k, step in enumerate(steps):
        text = env.reset(game="trust", seed=episode.seed, actions=[s.action for s in steps[:k]],
                         scores=[s.self_score for s in steps[:k]])
        stored = json.loads(store.prompts.step_prompt(episode.id, step.index))
        assert stored == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]
    for game in ("tetris", "chess", "minesweeper"):
        g = games.make(game, "explore")
        g.reset(3)
        assert env.reset(game=game, seed=3) == build_messages(g, None, [], "")[-1]["content"]
    with pytest.raises(ValueError, match="evaluation seed"):
        env.reset(game="trust", seed=EVAL_SEED_BASE)


def test_the_tool_template_renders_ordinary_conversations_byte_identically(tiny_base):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import supports_tool_calling

    from s3gym_games.trl_env import ensure_tool_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    assert not supports_tool_calling(tokenizer)
    env = GameEnvironment()
    conversations = [prompt_row("snake", 1, [], [])["prompt"][:1] + [{"role": "user", "content": env.reset("snake", 1)}],
                     [{"role": "user", "content": "hi"}],
                     [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]]
    before = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=g)
              for c in conversations for g in (True, False)]
    ensure_tool_template(tokenizer)
    assert tokenizer.chat_template == TOOL_TEMPLATE and supports_tool_calling(tokenizer)
    after = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=g)
             for c in conversations for g in (True, False)]
    assert after == before


def test_an_outcome_is_played_on_a_copy_of_the_state():
    env = GameEnvironment()
    env.reset(game="trust", seed=4, actions=["collaborate"], scores=[2.0])
    game = games.game_class("trust").replay("explore", 4, ["collaborate"])
    expected = game.step("cheat")
    outcome = step_outcome(env, "Answer: cheat, Score: 3")
    assert (outcome.action, outcome.self_score, outcome.parsed, outcome.valid) == ("cheat", 3.0, True, True)
    assert (outcome.reward, outcome.feedback) == (expected.reward, expected.feedback)
    assert env.state == ("trust", 4, ("collaborate",))  # unchanged
    garbage = step_outcome(env, "no idea")
    assert not garbage.parsed and not garbage.valid and garbage.reward == 0


@pytest.fixture
def canary(monkeypatch):
    """Every valid step's verifier reward becomes a canary number that must never reach a judge prompt."""
    from s3gym_games.base import Game

    real = Game.step

    def step(self, action):
        result = real(self, action)
        return type(result)(result.observation, result.feedback, 77.125 if result.valid else 0.0,
                            result.terminated, result.truncated, result.info)

    monkeypatch.setattr(Game, "step", step)
    return 77.125


def test_the_three_reward_sources(canary):
    envs = []
    for actions in ([], ["cheat"]):
        env = GameEnvironment()
        env.reset(game="trust", seed=2, actions=actions, scores=[3.0] * len(actions))
        envs += [env, env]
    completions = [_reply("cheat", 3), _reply("collaborate", 2), [{"role": "assistant", "content": "hmm"}],
                   _reply("collaborate", -1)]
    metrics = {}
    oracle = make_reward("oracle")(completions=completions, environments=envs,
                                   log_metric=lambda k, v: metrics.setdefault(k, v))
    assert oracle == [canary, canary, 0.0, canary] and metrics["verifier_reward"] == 3 * canary / 4
    assert metrics["parsed_replies"] == 0.75
    assert make_reward("stated")(completions=completions, environments=envs) == [3.0, 2.0, 0.0, -1.0]

    class Judge:
        def __init__(self):
            self.seen = []

        def score(self, env, outcome):
            prompt = judge_messages(env, outcome)
            self.seen.append((env.state, outcome.action, json.dumps(prompt)))
            return {"cheat": 1.5, "collaborate": 0.5}.get(outcome.action, -2.0)

    judge = Judge()
    assert make_reward("self", judge)(completions=completions, environments=envs) == [1.5, 0.5, -2.0, 0.5]
    assert [(s, a) for s, a, _ in judge.seen] == [(("trust", 2, ()), "cheat"), (("trust", 2, ()), "collaborate"),
                                                 (("trust", 2, ("cheat",)), "<no parsable answer>"),
                                                 (("trust", 2, ("cheat",)), "collaborate")]
    assert all(str(canary) not in text and "77.1" not in text for _, _, text in judge.seen)  # never the verifier's
    with pytest.raises(ValueError):
        make_reward("self")
    with pytest.raises(ValueError):
        make_reward("verifier")


def test_the_frozen_judge_scores_with_the_base_weights(tiny_base):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from s3gym_tui.training.rewards import FrozenJudge

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    plain = FrozenJudge(AutoModelForCausalLM.from_pretrained(tiny_base), tokenizer)
    torch.manual_seed(3)
    policy = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_base),
                            LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM"))
    policy.train()
    judged = FrozenJudge(policy, tokenizer)
    env = GameEnvironment()
    env.reset(game="trust", seed=0)
    outcome = step_outcome(env, "Answer: cheat, Score: 3")
    value = judged.score(env, outcome)
    assert value == plain.score(env, outcome) and -100 <= value <= 100  # the adapter was off
    assert judged.score(env, outcome) == value and judged.calls == 1  # cached per (state, action)
    assert policy.training  # left as it was


def test_rollouts_walk_real_episodes_on_exploration_seeds_only():
    ended = []
    seen_prompts = []

    def policy(messages, game):
        seen_prompts.append(messages)
        move = games.reference_policy("trust").act(game.view())
        return f"Answer: {move.action}, Score: 1"

    stream = StateStream("trust", [5, 6], policy, step_cap=3, on_rollout=lambda *a: ended.append(a))
    rows = stream.rows()
    first = [next(rows) for _ in range(7)]
    assert [r["seed"] for r in first] == [5, 5, 5, 6, 6, 6, 5]
    assert [len(r["actions"]) for r in first] == [0, 1, 2, 0, 1, 2, 0]
    assert ended == [("trust", 5, 3), ("trust", 6, 3)]
    replay = games.make("trust", "explore")
    replay.reset(5)
    for action in first[2]["actions"]:
        assert replay.step(action).valid  # the reference policy's moves, really played
    assert first[2]["scores"] == [1.0, 1.0]
    env = GameEnvironment()
    assert seen_prompts[2][-1]["content"] == env.reset(**{k: v for k, v in first[2].items() if k != "prompt"})
    with pytest.raises(ValueError, match="exploration seeds"):
        StateStream("trust", [3, EVAL_SEED_BASE + 1], policy)


@pytest.mark.parametrize("reward", ["oracle", "self"])
def test_grpo_trains_on_the_states_it_rolls_out(tiny_base, tmp_path, monkeypatch, reward):
    from s3gym_tui.training import grpo, rewards
    from s3gym_tui.training.config import GrpoConfig

    calls = []
    real = rewards.make_reward

    def spying(source, judge=None, format_weight=0.0):
        fn = real(source, judge, format_weight)

        def wrapped(**kwargs):
            values = fn(**kwargs)
            calls.append(([e.state for e in kwargs["environments"]],
                          [completion_text(c) for c in kwargs["completions"]], values))
            return values

        wrapped.__name__ = fn.__name__
        return wrapped

    monkeypatch.setattr(rewards, "make_reward", spying)
    rollouts, events = [], []
    result = grpo.train_grpo("trust", [11, 12], tiny_base, tmp_path / "g",
                             GrpoConfig(reward=reward, updates=3, num_generations=2, states_per_update=2, save_every=2,
                                        max_completion_length=6, rollout_step_cap=2, warm_start=0),
                             events.append, lambda *a: rollouts.append(a))
    assert result.steps == 3 and sorted(result.adapters) == [1, 2] and result.steps_at == {1: 2, 2: 3}
    assert len(calls) == 3
    states = [s for c in calls for s in c[0]]
    assert len(states) == 12 and all(s[0] == "trust" and s[1] in (11, 12) for s in states)
    assert all(states[i] == states[i + 1] for i in range(0, 12, 2))  # each group: G replies at one state
    assert [s[1] for s in states[::2]] == [11, 11, 12, 12, 11, 11] and [len(s[2]) for s in states[::2]] == [0, 1] * 3
    for env_states, texts, values in calls:
        for state, text, value in zip(env_states, texts, values):
            env = GameEnvironment()
            env.reset(game=state[0], seed=state[1], actions=state[2])
            outcome = step_outcome(env, text)
            if reward == "oracle":  # the verifier's reward, minus the format term (1 by default) without an action
                assert value == outcome.reward - (0.0 if outcome.parsed else 1.0)
            else:
                assert -100 <= value <= 100
    assert ("trust", 11, 2) in rollouts and ("trust", 12, 2) in rollouts
    losses = result.losses
    assert [p.step for p in losses] == [1, 2, 3] and all(p.phase == "grpo" and "verifier_reward" in p.metrics
                                                        for p in losses)
    assert [e.kind for e in events].count("checkpoint") == 2


def test_s3gym_train_grpo_end_to_end(tiny_base, tmp_path, capsys):
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.training.config import GrpoConfig

    db = tmp_path / "g.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
                                              eval_every=2, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    code = main(["train", run.id, "--method", "grpo", "--reward", "oracle", "--base", str(tiny_base), "--updates", "2",
                 "--generations", "2", "--states-per-update", "1", "--save-every", "1", "--rollout-step-cap", "1",
                 "--completion-tokens", "6", "--warm-start", "2", "--warm-start-epochs", "1", "--eval-episodes", "1",
                 "--step-cap", "1", "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "GRPO updates" in out.out and "rollouts" in out.out and "oracle ablation" in out.out
    assert "grpo training" in out.out and "reward oracle" in out.out
    with Store(db) as store:
        training = store.trainings.list(source_run=run.id)[0]
        assert (training.method, training.reward, training.status) == ("grpo", "oracle", "finished")
        assert training.settings["seeds"] == [0, 1] and training.steps == 2
        assert training.settings["version"] == 2 and training.settings["method"] == "grpo"
        # a short format warm start (the command's default of 16 replies x 2 passes is GrpoConfig's, below)
        assert training.settings["recipe"]["warm_start"] == 2 and GrpoConfig().warm_start == 16
        assert {p.phase for p in store.trainings.losses(training.id)} == {"warm-start", "grpo"}
        sources = store.trainings.training_sources(training.id, "rollout")
        assert sources and all(s.mode == "explore" and s.seed in (0, 1) and s.n == 1 for s in sources)
        assert [c.x for c in store.trainings.training_checkpoints(training.id)] == [0, 1, 2]
        assert [c.x for c in store.checkpoints.list(training.id)] == [0, 1, 2]
        assert store.runs.get_run(training.id).config.pathway == "trained"
        assert audit(store).ok
    code = main(["train", run.id, "--method", "ppo", "--db", str(db)])
    assert code == 2 and "unknown method 'ppo'" in capsys.readouterr().err
    code = main(["train", run.id, "--method", "grpo", "--reward", "verifier", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "--reward must be 'self', 'stated' or 'oracle' (given verifier)" in err


def test_updates_without_signal_are_warned_live_stored_and_summed_up(tiny_base, tmp_path, capsys, monkeypatch):
    """Real GRPO updates on the tiny base with a scripted constant reward: no group has any reward variance,
    so no update has a signal. The CLI says so for each update as it happens and in a summary line, and
    every update is stored with its figures and its verdict."""
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.training import rewards

    def constant(source, judge=None, format_weight=0.0):
        def reward(prompts=None, completions=None, environments=None, log_metric=None, **kwargs):
            if log_metric is not None:
                log_metric("parsed_replies", 0.0)
            return [1.0] * len(completions)

        reward.__name__ = "constant_reward"
        return reward

    monkeypatch.setattr(rewards, "make_reward", constant)
    db = tmp_path / "z.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                              eval_every=1, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    code = main(["train", run.id, "--method", "grpo", "--reward", "stated", "--base", str(tiny_base), "--updates", "2",
                 "--generations", "2", "--states-per-update", "1", "--save-every", "2", "--rollout-step-cap", "1",
                 "--completion-tokens", "4", "--eval-episodes", "1", "--step-cap", "1", "--progress", "plain",
                 "--warm-start", "0", "--db", str(db)])  # no warm start: its checkpoints are the base model
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "update 1 had no signal" in out.out and "update 2 had no signal" in out.out  # live, per update
    assert "every group had zero reward variance" in out.out
    assert "2 of 2 grpo updates had no signal" in out.out and "nothing was learnt" in out.out  # after it
    with Store(db) as store:
        (training,) = store.trainings.list(source_run=run.id)
        losses = store.trainings.losses(training.id)
        assert [p.step for p in losses] == [1, 2]
        for point in losses:
            m = point.metrics
            assert m["no_signal"] == 1.0 and m["frac_reward_zero_std"] == 1.0 and m["reward_std"] == 0.0
            assert m["parsed_replies"] == 0.0 and m["grad_norm"] == 0.0
    code = main(["trainings", "--db", str(db)])
    assert code == 0 and "2/2" in capsys.readouterr().out
    code = main(["trainings", "--json", "--db", str(db)])
    (data,) = json.loads(capsys.readouterr().out)
    assert data["signal"] == [{"phase": "grpo", "updates": 2, "no_signal": 2, "zero_variance_share": 1.0,
                               "parsed_share": 0.0, "reward_std": 0.0, "grad_norm": 0.0, "kl": None,
                               "free_parsed_share": None, "prior": None}]


def test_a_rollout_ends_where_the_next_prompt_would_not_fit():
    ended = []
    stream = StateStream("trust", [2], lambda messages, game: "Answer: cheat, Score: 3", step_cap=5,
                         on_rollout=lambda *a: ended.append(a),
                         fits=lambda messages: messages[-1]["content"].count("LLM:") < 2)  # a tiny "window"
    rows = stream.rows()
    first = [next(rows) for _ in range(3)]
    assert [len(r["actions"]) for r in first] == [0, 1, 0]  # the episode stops before its third state
    assert stream.too_long == 1 and stream.episodes == 1 and ended == [("trust", 2, 2)]
