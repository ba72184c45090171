"""GRPO experts with TRL's GRPOTrainer, at two levels, one LoRA adapter saved every `save_every`
updates (checkpoint x = 1, 2, ...), rewards self-judged by default (rewards.py; oracle: the ablation).

- step level (default): states from on-policy rollouts on the run's exploration seeds (rollouts.py);
  the game is TRL's environment (`environment_factory`, s3gym_games.trl_env) and each state's G sampled
  replies form a group. Our protocol has no tools (one reply, one action) and the engine re-sends the
  whole current episode with every action, so multi-turn play happens across prompts.
- episode level (`level="episode"`): a group is G whole episodes on one exploration seed, played by
  the policy through TRL's `rollout_func` (group_rollouts.py: the completion is the policy's replies
  with the game's text masked out of the loss), each with its outcome (judged return; verifier's as
  the oracle ablation). Every rollout episode goes to `on_episode` (the pipeline stores it).

Replies are sampled by us at both levels (sampling.py: by default half of every group under the
answer-line grammar, half free, with a format term in the reward), because the bundled model's free
replies rarely parse. Advantages go through ONE overridable method,
grpo_trainer.S3GymGRPOTrainer.token_advantages (per-token advantages [B, T]; default: A_i on every
policy token of the trajectory); a method like TASPO subclasses the trainer and passes
`trainer_class`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from s3gym_tui.training.backend import TrainEvent, TrainResult, quiet, start_training
from s3gym_tui.training.config import GrpoConfig
from s3gym_tui.training.rollouts import OnRollout

if TYPE_CHECKING:
    from s3gym_tui.training.group_rollouts import Rollout
    from s3gym_tui.training.rollouts import StateStream


# `datasets` fingerprints a generator's closure by pickling it (the model, the store...): the stream is
# reached through this registry by a plain integer key instead.
_STREAMS: dict[int, "StateStream"] = {}


def _stream_rows(stream_key: int):
    yield from _STREAMS[stream_key].rows()


def _episode_rows(game: str, seeds: str):
    """Episode level: one row per episode to play, round robin over the exploration seeds (given as
    text: `datasets` would read a list in gen_kwargs as shards, one seed each, and stay on the first)."""
    import itertools

    from s3gym_tui.training.group_rollouts import system_prompt_row

    for seed in itertools.cycle(int(s) for s in seeds.split(",")):
        yield system_prompt_row(game, seed)


def episode_features():
    from datasets import Features, List, Value

    from s3gym_tui.training.group_rollouts import SEED_KEY

    return Features({"prompt": List({"role": Value("string"), "content": Value("string"), SEED_KEY: Value("int64")}),
                     "game": Value("string"), "seed": Value("int64")})


def state_features():
    from datasets import Features, List, Value

    from s3gym_games.trl_env import GRAMMAR_KEY

    return Features({"prompt": List({"role": Value("string"), "content": Value("string"),
                                     GRAMMAR_KEY: Value("string")}),
                     "game": Value("string"), "seed": Value("int64"), "actions": List(Value("string")),
                     "scores": List(Value("float64"))})


def vllm_args(config: GrpoConfig) -> dict:
    """TRL's own vLLM generation (`--vllm server|colocate`); nothing when it is off."""
    if config.vllm is None:
        return {}
    args = {"use_vllm": True, "vllm_mode": config.vllm}
    if config.vllm_url:
        args["vllm_server_base_url"] = config.vllm_url
    return args


def per_rank_accumulation(config: GrpoConfig) -> int:
    """Replies each process accumulates per update, so that an update compares `states_per_update`
    groups of `num_generations` replies however many processes train (ranks.py): with N of them, each
    takes 1/N of the replies."""
    from s3gym_tui.training.ranks import world

    replies, ranks = config.num_generations * config.states_per_update, world().size
    if replies % ranks:
        raise ValueError(f"GRPO across {ranks} processes: --generations x --states-per-update ({replies}) must be "
                         f"a multiple of {ranks}")
    return replies // ranks


def short_completion(game: str, seed: int, tokenizer: Any, max_tokens: int) -> Optional[str]:
    """Why `max_tokens` cannot hold a whole answer line of `game` (a sampled legal action at the first
    state of `seed`, with a score), or None. A constrained reply cut short never parses."""
    import random

    import s3gym_games as games_pkg
    from s3gym_games.trl_env import MODE

    env = games_pkg.make(games_pkg.canonical(game), MODE)
    env.reset(seed)
    line = f"Answer: {env.sample_action(random.Random(0))}, Score: 10.5"
    needed = len(tokenizer(line, add_special_tokens=False)["input_ids"]) + 1  # and the end of the reply
    if needed <= max_tokens:
        return None
    return (f"--completion-tokens {max_tokens} cannot hold a whole {game} answer line ({needed} tokens at the first "
            f"state): constrained replies will be cut and not parse; use --completion-tokens {needed + 8} or more")


def train_grpo(game: str, seeds: Sequence[int], base_dir: Path, out_dir: Path, config: GrpoConfig = GrpoConfig(),
               progress: Callable[[TrainEvent], None] = lambda e: None,
               on_rollout: OnRollout = lambda game, seed, steps: None, resume: bool = False,
               on_episode: Callable[["Rollout"], None] = lambda rollout: None,
               trainer_class: Any = None) -> TrainResult:
    """Train a LoRA expert (or a full fine-tune) for `game` with GRPO, as `config` (the recipe) says; returns
    the adapters (one per checkpoint) and figures.
    `trainer_class`: a subclass of grpo_trainer.S3GymGRPOTrainer (its `token_advantages`), or its
    "module:Class" name (what reaches the other ranks of a data-parallel training)."""
    import os

    from datasets import IterableDataset
    from trl import GRPOConfig

    from s3gym_games.trl_env import GameEnvironment, ensure_tool_template
    from s3gym_tui.training.group_rollouts import GroupRollouts, episode_reward
    from s3gym_tui.training.grpo_trainer import S3GymGRPOTrainer
    from s3gym_tui.training.hf import (TRAINER_DIR, Reporter, adapted, compact_lm_head, existing_adapters, finish,
                                       logs_dir, quiet_trainer, resume_point, run_trainer, trainer_args)
    from s3gym_tui.training.lengths import context_window
    from s3gym_tui.training.rewards import FrozenJudge, make_reward
    from s3gym_tui.training.rollouts import StateStream
    from s3gym_tui.training.grammar import answer_line
    from s3gym_tui.training.sampling import ReplySampler, constrained_slot

    if config.level not in ("step", "episode"):
        raise ValueError(f"unknown level {config.level!r}: step or episode")
    constrained_slot(config.sampling, 0, config.num_generations)  # an unknown sampling fails here
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory / rollout_func are experimental
    out_dir, device, model, tokenizer = start_training(base_dir, out_dir, config.use_cpu)
    tokenizer.padding_side = "left"
    ensure_tool_template(tokenizer)
    model = adapted(model, config)
    if not device.use_cpu:
        model = model.to(device.kind)
    result = TrainResult(base_dir=Path(base_dir), out_dir=out_dir)
    checkpoint = resume_point(out_dir / TRAINER_DIR) if resume else None
    if checkpoint:
        result.adapters.update(existing_adapters(out_dir))
        result.resumed_from = checkpoint
    sampler = ReplySampler(model, tokenizer, config.temperature, config.max_completion_length, seed=config.seed,
                           top_p=config.top_p)
    window = context_window(base_dir)
    judge = FrozenJudge(model, tokenizer, config.judge_max_new_tokens) if config.reward == "self" else None
    rollouts = GroupRollouts(game, config.level, sampler, config.num_generations, config.sampling, config.reward,
                             judge, config.format_weight, config.rollout_step_cap, window, on_episode)

    def fits(messages: list) -> bool:
        if not window:
            return True
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
        return len(ids) + max(config.max_completion_length, config.judge_max_new_tokens) <= window

    if config.sampling != "free" and seeds:
        short = short_completion(game, seeds[0], tokenizer, config.max_completion_length)
        if short:
            result.notes["completion_tokens_short"] = short
            progress(TrainEvent("load", phase="grpo", warning=short))
    if config.warm_start and not checkpoint:  # a GRPO checkpoint already holds the warmed weights
        from s3gym_tui.training.warm_start import warm_start

        result.notes.update(warm_start(game, seeds, model, tokenizer, fits, out_dir, config, device, result,
                                       progress, resume))

    def player(messages: list, game_now: Any) -> str:
        """The rollout player (step level): the policy, under the grammar unless sampling is free."""
        pattern = (answer_line(game_now.action_grammar())
                   if constrained_slot(config.sampling, 0, config.num_generations) else None)
        return sampler.text(sampler.sample(sampler.prompt_ids(messages), pattern))

    key = None
    stream = None
    if config.level == "step":
        stream = StateStream(game, seeds, player, config.rollout_step_cap, on_rollout, fits)
        key = id(stream)
        _STREAMS[key] = stream
        dataset = IterableDataset.from_generator(_stream_rows, features=state_features(),
                                                 gen_kwargs={"stream_key": key})
        reward_funcs = [make_reward(config.reward, judge, config.format_weight)]
        environment = GameEnvironment
    else:
        listed = ",".join(str(int(s)) for s in seeds)
        dataset = IterableDataset.from_generator(_episode_rows, features=episode_features(),
                                                 gen_kwargs={"game": game, "seeds": listed})
        reward_funcs = [episode_reward]
        environment = None
    args = GRPOConfig(
        # one sampled reply per forward/backward (the rest accumulated): RAM like SFT at batch 1
        max_steps=config.updates, per_device_train_batch_size=1,
        gradient_accumulation_steps=per_rank_accumulation(config), num_generations=config.num_generations,
        max_completion_length=config.max_completion_length, temperature=config.temperature, top_p=config.top_p,
        beta=config.beta, loss_type=config.loss_type, epsilon=config.epsilon, epsilon_high=config.epsilon_high,
        num_iterations=config.num_iterations, scale_rewards=config.scale_rewards, save_strategy="steps",
        save_steps=config.save_every, save_total_limit=1, shuffle_dataset=False, log_completions=False,
        **trainer_args(config, device, out_dir / TRAINER_DIR, logs_dir(out_dir, "grpo")), **vllm_args(config))
    reporter = Reporter(result, progress, "grpo", save_every=config.save_every, first_x=len(result.adapters) + 1)
    progress(TrainEvent("load", max_steps=config.updates, phase="grpo"))
    cls = trainer_class or S3GymGRPOTrainer
    if isinstance(cls, str):  # "module:Class": sent as is to the other ranks (ranks.together leaves classes out)
        import importlib

        module, _, name = cls.partition(":")
        cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, S3GymGRPOTrainer)):
        raise TypeError("trainer_class must subclass grpo_trainer.S3GymGRPOTrainer")
    try:
        with quiet():
            trainer = quiet_trainer(cls(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                                        processing_class=tokenizer, callbacks=[reporter],
                                        environment_factory=environment, rollout_func=rollouts))
            trainer.group_rollouts = rollouts
            started = time.perf_counter()
            with compact_lm_head():
                run_trainer(trainer, checkpoint, "grpo")
    finally:
        if key is not None:
            _STREAMS.pop(key, None)
    result.examples = trainer.state.global_step * config.states_per_update * config.num_generations
    result.tokens = int(trainer.state.num_input_tokens_seen or 0)
    finish(result, trainer, started)
    if sampler.engines:
        result.notes["constrained_engines"] = sampler.engines
    if stream is not None:
        result.notes["rollout_states"] = stream.states
        result.notes["rollout_episodes_cut_by_the_window"] = stream.too_long
    else:
        result.notes["rollout_episodes"] = rollouts.episodes
        result.notes["rollout_episodes_cut_by_the_window"] = rollouts.cut
    progress(TrainEvent("done", result.steps, result.steps, phase="grpo"))
    del trainer, model
    return result
