"""GRPO experts with TRL's GRPOTrainer: the game as its environment (environment_factory), states from
on-policy rollouts on the run's exploration seeds (rollouts.py), one LoRA adapter saved every
`save_every` updates (checkpoint x = 1, 2, ...), rewards from rewards.py (self-judged by default).

Design notes (TRL 1.16, read in its source): `environment_factory` instantiates one environment per
sampled reply and calls `reset(**row)`, whose returned string completes the prompt; environment
methods become tools for a tool-calling loop. Our protocol has no tools (one reply, one action) and
the engine re-sends the whole current episode with every action, so the environment has none and
multi-turn play happens across prompts: the rollout player walks each episode, and each state it
reaches is a prompt whose G sampled replies form a GRPO group (the prompts are exactly the engine's).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from s3gym_tui.training.backend import TrainConfig, TrainEvent, TrainResult, quiet, start_training
from s3gym_tui.training.options import GrpoConfig
from s3gym_tui.training.rollouts import OnRollout

if TYPE_CHECKING:
    from s3gym_tui.training.rollouts import StateStream


# `datasets` fingerprints a generator's closure by pickling it (the model, the store...): the stream is
# reached through this registry by a plain integer key instead.
_STREAMS: dict[int, "StateStream"] = {}


def _stream_rows(stream_key: int):
    yield from _STREAMS[stream_key].rows()


def state_features():
    from datasets import Features, List, Value

    return Features({"prompt": List({"role": Value("string"), "content": Value("string")}),
                     "game": Value("string"), "seed": Value("int64"), "actions": List(Value("string")),
                     "scores": List(Value("float64"))})


def train_grpo(game: str, seeds: Sequence[int], base_dir: Path, out_dir: Path, config: GrpoConfig = GrpoConfig(),
               lora: TrainConfig = TrainConfig(), progress: Callable[[TrainEvent], None] = lambda e: None,
               on_rollout: OnRollout = lambda game, seed, steps: None, resume: bool = False) -> TrainResult:
    """Train a LoRA expert for `game` with GRPO; returns the adapters (one per checkpoint) and figures."""
    import os

    from datasets import IterableDataset
    from peft import get_peft_model
    from trl import GRPOConfig, GRPOTrainer

    from s3gym_tui.training.environment import GameEnvironment, ensure_tool_template
    from s3gym_tui.training.hf import (TRAINER_DIR, Reporter, compact_lm_head, existing_adapters, finish, lora_config,
                                       quiet_trainer, resume_point, run_trainer)
    from s3gym_tui.training.lengths import context_window
    from s3gym_tui.training.rewards import FrozenJudge, make_reward
    from s3gym_tui.training.rollouts import Sampler, StateStream

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental
    out_dir, device, model, tokenizer = start_training(base_dir, out_dir, lora.use_cpu)
    tokenizer.padding_side = "left"
    ensure_tool_template(tokenizer)
    model = get_peft_model(model, lora_config(lora))
    if not device.use_cpu:
        model = model.to(device.kind)
    result = TrainResult(base_dir=Path(base_dir), out_dir=out_dir)
    checkpoint = resume_point(out_dir / TRAINER_DIR) if resume else None
    if checkpoint:
        result.adapters.update(existing_adapters(out_dir))
        result.resumed_from = checkpoint
    sampler = Sampler(model, tokenizer, config.temperature, config.max_completion_length, seed=lora.seed)
    window = context_window(base_dir)

    def fits(messages: list) -> bool:
        if not window:
            return True
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
        return len(ids) + max(config.max_completion_length, config.judge_max_new_tokens) <= window

    stream = StateStream(game, seeds, sampler, config.rollout_step_cap, on_rollout, fits)
    key = id(stream)
    _STREAMS[key] = stream
    dataset = IterableDataset.from_generator(_stream_rows, features=state_features(), gen_kwargs={"stream_key": key})
    judge = FrozenJudge(model, tokenizer, config.judge_max_new_tokens) if config.reward == "self" else None
    args = GRPOConfig(
        # one sampled reply per forward/backward (the rest accumulated): RAM like SFT at batch 1
        output_dir=str(out_dir / TRAINER_DIR), max_steps=config.updates, per_device_train_batch_size=1,
        gradient_accumulation_steps=config.num_generations * config.states_per_update,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length, temperature=config.temperature,
        learning_rate=config.learning_rate, beta=config.beta, logging_steps=1, save_strategy="steps",
        save_steps=config.save_every, save_total_limit=1, report_to="none", use_cpu=device.use_cpu,
        bf16=device.bf16, fp16=False, activation_checkpointing=lora.gradient_checkpointing, seed=lora.seed,
        shuffle_dataset=False, disable_tqdm=True, dataloader_num_workers=0, log_completions=False)
    reporter = Reporter(result, progress, "grpo", save_every=config.save_every, first_x=len(result.adapters) + 1)
    progress(TrainEvent("load", max_steps=config.updates, phase="grpo"))
    try:
        with quiet():
            trainer = quiet_trainer(GRPOTrainer(model=model, reward_funcs=[make_reward(config.reward, judge)],
                                                args=args, train_dataset=dataset, processing_class=tokenizer,
                                                callbacks=[reporter], environment_factory=GameEnvironment))
            started = time.perf_counter()
            with compact_lm_head():
                run_trainer(trainer, checkpoint)
    finally:
        _STREAMS.pop(key, None)
    result.examples = trainer.state.global_step * config.states_per_update * config.num_generations
    result.tokens = int(trainer.state.num_input_tokens_seen or 0)
    finish(result, trainer, started)
    result.notes["rollout_states"] = stream.states
    result.notes["rollout_episodes_cut_by_the_window"] = stream.too_long
    progress(TrainEvent("done", result.steps, result.steps, phase="grpo"))
    del trainer, model
    return result
