"""GRPO with a learning signal, at both levels, on the tiny base: replies sampled under the answer-line
grammar parse (free ones of a random model do not); episode-level groups are G whole episodes on one
exploration seed, each stored as an exploration episode (never on an evaluation seed); the advantage
hook receives per-token shapes and what it returns is what the loss uses; `s3gym train --level
episode` end to end in a subprocess, read back from the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_tui.cli import main
from s3gym_tui.models import EVAL_SEED_BASE, RunConfig
from s3gym_tui.store import Store, audit

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]


def _sampler(tiny_base, temperature=1.0, max_new_tokens=24):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from s3gym_tui.training.sampling import ReplySampler

    return ReplySampler(AutoModelForCausalLM.from_pretrained(tiny_base), AutoTokenizer.from_pretrained(tiny_base),
                        temperature, max_new_tokens, seed=1)


def test_replies_under_the_answer_line_grammar_parse_and_free_ones_of_a_random_model_do_not(tiny_base):
    from s3gym_games.prompt import build_messages
    from s3gym_tui.training.grammar import answer_line_pattern
    from s3gym_tui.training.sampling import constrained_slot

    sampler = _sampler(tiny_base)
    game = games.make("trust", "explore")
    game.reset(3)
    prompt = sampler.prompt_ids(build_messages(game, None, [], ""))
    pattern = answer_line_pattern(game.action_grammar())
    constrained = [parse_reply(sampler.text(sampler.sample(prompt, pattern))) for _ in range(4)]
    assert all(p.action in ("collaborate", "cheat") for p in constrained)
    free = [parse_reply(sampler.text(sampler.sample(prompt, None))) for _ in range(4)]
    assert all(p.action is None for p in free)  # the random model writes no answer line by itself
    assert [constrained_slot("mixed", k, 4) for k in range(4)] == [True, True, False, False]
    assert [constrained_slot("mixed", k, 3) for k in range(3)] == [True, True, False]
    assert not constrained_slot("free", 0, 4) and constrained_slot("constrained", 3, 4)
    with pytest.raises(ValueError, match="unknown sampling"):
        constrained_slot("greedy", 0, 2)


def test_an_episode_rollout_masks_the_games_text_and_refuses_an_evaluation_seed(tiny_base):
    from s3gym_tui.training.group_rollouts import GroupRollouts, episode_prompt

    played = []
    rollouts = GroupRollouts("trust", "episode", _sampler(tiny_base), 2, "mixed", "oracle", format_weight=1.0,
                             step_cap=3, on_episode=played.append)
    out = rollouts([episode_prompt("trust", 7)] * 2)
    assert len(played) == 2 and [r.seed for r in played] == [7, 7] and [r.constrained for r in played] == [True, False]
    tok = rollouts.sampler.tokenizer
    for r, ids, mask in zip(played, out["completion_ids"], out["env_mask"]):
        assert len(r.steps) == 3 and len(ids) == len(mask) == len(r.turn_of_token)
        for k, step in enumerate(r.steps):  # each reply's tokens are in the completion, unmasked, in order
            own = [t for t, turn in zip(ids, r.turn_of_token) if turn == k]
            assert tok.decode(own, skip_special_tokens=True).strip() == step.reply
            assert all(m == 1 for m, turn in zip(mask, r.turn_of_token) if turn == k)
        game_text = tok.decode([t for t, m in zip(ids, mask) if m == 0])
        assert "Step 2 of at most" in game_text and "Step 3 of at most" in game_text  # the game's turns, masked
        replay = games.game_class("trust").replay("explore", 7, [s.action for s in r.steps])
        assert r.score == replay.score() and [s.reward for s in r.steps] == [
            games.game_class("trust").replay("explore", 7, [s.action for s in r.steps[:k]]).step(s.action).reward
            for k, s in enumerate(r.steps)]
        assert r.reward == sum(s.reward for s in r.steps) - 1.0 * r.unparsed
    assert played[0].unparsed == 0 and played[1].unparsed == 3  # the constrained sibling parses, the free one not
    assert out["s3gym_reward"] == [r.reward for r in played]
    bad = episode_prompt("trust", 7)
    bad[0] = {**bad[0], "s3gym_seed": EVAL_SEED_BASE}
    with pytest.raises(ValueError, match="evaluation seed"):
        rollouts([bad])


def test_the_store_refuses_a_rollout_episode_on_an_evaluation_seed(store):
    from s3gym_tui.store.errors import LeakageError
    from s3gym_tui.training.group_rollouts import Rollout
    from s3gym_tui.training.rollout_store import RolloutStore, rollout_run_id

    keep = RolloutStore(store, "t-1", "trust", [0, 1], 3, 1.0)
    with pytest.raises(LeakageError, match="evaluation seed"):
        keep(Rollout("trust", EVAL_SEED_BASE + 2, 0, True, [1, 2]))
    assert store.episodes.list(rollout_run_id("t-1")) == []


def _train(tiny_base, out, level, trainer_class=None, reward="oracle"):
    from s3gym_tui.training import grpo
    from s3gym_tui.training.config import GrpoConfig

    episodes = []
    result = grpo.train_grpo("trust", [11, 12], tiny_base, out,
                             GrpoConfig(reward=reward, updates=1, num_generations=2, states_per_update=1, save_every=1,
                                        max_completion_length=10, rollout_step_cap=2, level=level,
                                        learning_rate=1e-2, format_weight=5.0, warm_start=0),  # parsed (>= -1) beats prose (-5)
                             on_episode=episodes.append, trainer_class=trainer_class)
    return result, episodes


@pytest.mark.parametrize("level", ["step", "episode"])
def test_the_advantage_hook_gets_per_token_shapes_and_what_it_returns_is_what_the_loss_uses(tiny_base, tmp_path,
                                                                                           level):
    from s3gym_tui.training.grpo_trainer import S3GymGRPOTrainer

    seen = []

    class Recording(S3GymGRPOTrainer):
        def token_advantages(self, advantages, loss_mask, rollouts):
            out = super().token_advantages(advantages, loss_mask, rollouts)
            seen.append((advantages.clone(), loss_mask.clone(), list(rollouts), out.clone()))
            return out

    class Silenced(S3GymGRPOTrainer):
        def token_advantages(self, advantages, loss_mask, rollouts):
            return super().token_advantages(advantages, loss_mask, rollouts) * 0.0

    plain, _ = _train(tiny_base, tmp_path / "a", level, Recording)
    (advantages, mask, rollouts, out), = seen
    assert advantages.shape == (2,) and mask.shape == out.shape and mask.shape[0] == 2 and len(rollouts) == 2
    assert (out == advantages.unsqueeze(1)).all()  # the default: A_i on every token
    assert float(advantages.abs().sum()) > 0  # the group had reward variance (parsed vs not)
    for row, r in enumerate(rollouts):
        turns = r.turns(mask.shape[1])
        assert [int(m) for m in mask[row]] == [1 if t >= 0 else 0 for t in turns]  # policy tokens only
    silenced, _ = _train(tiny_base, tmp_path / "b", level, Silenced)
    assert plain.losses[0].metrics["grad_norm"] > 0
    assert silenced.losses[0].metrics["grad_norm"] == 0  # the loss used the hook's advantages
    with pytest.raises(TypeError, match="S3GymGRPOTrainer"):
        _train(tiny_base, tmp_path / "c", level, object)
    with pytest.raises(TypeError, match="S3GymGRPOTrainer"):
        _train(tiny_base, tmp_path / "d", level, "s3gym_tui.training.rewards:FrozenJudge")


def test_a_trainer_class_named_by_text_is_the_one_used(tiny_base, tmp_path):
    result, _ = _train(tiny_base, tmp_path / "n", "step", "test_grpo_levels:Muted")
    assert result.losses[0].metrics["grad_norm"] == 0  # Muted's advantages, found by its name


def _muted():
    from s3gym_tui.training.grpo_trainer import S3GymGRPOTrainer

    class Muted(S3GymGRPOTrainer):
        def token_advantages(self, advantages, loss_mask, rollouts):
            return super().token_advantages(advantages, loss_mask, rollouts) * 0.0

    return Muted


Muted = _muted()


def test_step_level_records_the_parsed_shares_and_the_format_term(tiny_base, tmp_path):
    result, episodes = _train(tiny_base, tmp_path / "s", "step")
    (point,) = result.losses
    assert episodes == []  # step level stores no episodes of its own
    m = point.metrics
    assert m["parsed_replies"] == 0.5 and m["parsed_free_replies"] == 0.0  # 1 of 2 constrained, the free one not
    assert m["frac_reward_zero_std"] == 0.0 and m["no_signal"] == 0.0
    assert m["source_reward_std"] >= 0.0  # the oracle's own spread, before the format term (0: the finding to show)


EPISODE_CLI = ["--warm-start", "0", "--method", "grpo", "--level", "episode", "--reward", "oracle", "--updates", "2", "--generations", "2",
               "--states-per-update", "1", "--save-every", "2", "--rollout-step-cap", "2", "--completion-tokens", "8",
               "--eval-episodes", "1", "--step-cap", "1", "--progress", "plain"]


def test_s3gym_train_level_episode_end_to_end_in_a_subprocess(tiny_base, tmp_path, capsys):
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.training.rollout_store import rollout_run_id

    db = tmp_path / "e.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
                                              eval_every=2, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT),
               S3GYM_TRAINING_DIR=str(tmp_path / "training"))
    proc = subprocess.run([sys.executable, "-m", "s3gym_tui", "train", run.id, "--base", str(tiny_base), *EPISODE_CLI,
                           "--db", str(db)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with Store(db) as store:
        (training,) = store.trainings.list(source_run=run.id)
        assert training.status == "finished" and training.settings["recipe"]["level"] == "episode"
        assert training.settings["recipe"]["sampling"] == "mixed" and training.settings["recipe"]["format_weight"] == 1.0
        rollout_run = store.runs.get_run(rollout_run_id(training.id))
        episodes = store.episodes.list(rollout_run.id)
        assert len(episodes) == 4  # 2 updates x 1 group x G = 2
        exploration = {run.config.explore_seed(i) for i in range(2)}
        assert all(e.phase == e.mode == "explore" and e.seed in exploration and e.seed < EVAL_SEED_BASE
                   for e in episodes)
        assert [e.seed for e in episodes] == [0, 0, 1, 1]  # siblings: a group is G episodes on one seed
        for e in episodes:
            steps = store.episodes.steps(e.id)
            assert e.status == "finished" and len(steps) == 2 and e.score is not None
            replay = games.game_class("trust").replay("explore", e.seed, [s.action for s in steps])
            assert e.score == replay.score()
            assert json.loads(store.prompts.prompt_of(steps[0]))[-1]["content"].startswith("Game rules:")
        sources = store.trainings.training_sources(training.id, "rollout")
        assert sorted(s.ref for s in sources) == sorted(e.id for e in episodes)
        assert [p.step for p in store.trainings.losses(training.id)] == [1, 2]
        assert all("parsed_replies" in p.metrics for p in store.trainings.losses(training.id))
        assert audit(store).ok
    # read back and refused through the same command line in this process: the training above is the one
    # that needs a process of its own (two more interpreters only started the CLI again)
    assert main(["trainings", "--json", "--db", str(db)]) == 0
    (data,) = json.loads(capsys.readouterr().out)
    assert data["settings"]["recipe"]["level"] == "episode"
    assert data["signal"][0]["parsed_share"] is not None and data["signal"][0]["free_parsed_share"] is not None
    assert main(["train", run.id, "--method", "grpo", "--level", "game", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--level must be 'step' or 'episode' (given game)" in err and len(err.strip().splitlines()) == 1, err


def test_a_group_split_across_processes_keeps_its_mix_of_constrained_and_free(monkeypatch):
    """TRL deals a group's G copies out to the ranks; each rank numbers its own copies, so the place of
    a copy in its group comes from (copy on this rank, rank): together the ranks cover 0..G-1."""
    from s3gym_tui.training import ranks
    from s3gym_tui.training.group_rollouts import GroupRollouts

    prompt = [{"role": "user", "content": "state A"}]
    other = [{"role": "user", "content": "state B"}]
    one = GroupRollouts("trust", "step", sampler=None, num_generations=4, sampling="mixed")
    assert one.slots([prompt] * 4 + [other] * 4) == [0, 1, 2, 3, 0, 1, 2, 3]
    places = []
    for rank in (0, 1):
        monkeypatch.setattr(ranks, "world", lambda rank=rank: ranks.World(rank=rank, size=2, local_rank=rank))
        places += one.slots([prompt] * 2)  # each rank holds two of the group's four copies
    assert sorted(places) == [0, 1, 2, 3]
    assert sum(one._constrained(k) for k in places) == 2  # half under the grammar, as in one process


@pytest.mark.parametrize("game", games.names())
def test_constrained_replies_follow_the_grammar_of_their_own_state_in_every_game(tiny_base, game):
    """The games' grammars depend on the state (none exists before a reset: snake's reverse move, chess's
    cells, tetris's columns...): a step-level row carries its state's grammar, and constrained replies at
    both levels are legal for the state they answer."""
    import random

    from s3gym_games.trl_env import GRAMMAR_KEY, GameEnvironment
    from s3gym_tui.training.grammar import action_is_wellformed
    from s3gym_tui.training.group_rollouts import GroupRollouts, episode_prompt
    from s3gym_tui.training.rollouts import StateStream

    rng = random.Random(0)
    stream = StateStream(game, [11], lambda messages, env: f"Answer: {env.sample_action(rng)}, Score: 0", step_cap=2)
    rows = []
    for row in stream.rows():
        rows.append(row)
        if len(rows) == 2:
            break
    step = GroupRollouts(game, "step", _sampler(tiny_base, max_new_tokens=160), 2, "constrained", "oracle")
    for i, row in enumerate(rows):
        env = GameEnvironment()
        observation = env.reset(**row)
        grammar = env.game.action_grammar()
        assert row["prompt"][0][GRAMMAR_KEY] == grammar
        prompt = row["prompt"][:-1] + [{**row["prompt"][-1], "content": observation}]  # as TRL fills it
        reply = step.sampler.text(step.reply(prompt, 0, key=i).completion_ids)
        action = parse_reply(reply).action
        assert action is not None and action_is_wellformed(action, grammar), (reply, grammar[:200])
        assert action.upper() != "END"  # no pattern holds END: a reply that says it followed another grammar
    episode = GroupRollouts(game, "episode", _sampler(tiny_base, max_new_tokens=160), 2, "constrained", "oracle",
                            step_cap=2)
    rollout = episode.episode(episode_prompt(game, 11), 0, key=7)
    for i, s in enumerate(rollout.steps):
        state = games.game_class(game).replay("explore", 11, [t.action for t in rollout.steps[:i]])
        assert s.parsed and action_is_wellformed(s.action, state.action_grammar()), (s.reply, s.action)
        assert s.action.upper() != "END"
