"""A format warm start before GRPO (`--warm-start N`): N states the base reaches on the run's exploration
seeds, each answered by the base itself under the game's answer-line grammar (the same constrained
sampling GRPO's mixed groups use), then one short SFT pass on those replies, before the first update.

Why (benchmarks/train_learns.py, bundled SmolLM2-135M, trust): with mixed sampling and the format term
alone, 4 GRPO updates moved free replies that parse from 0/6 to 2/6 at evaluation; a reply the policy
never writes freely gets its signal only through the constrained half, whose shared tokens cancel in
the group. The warm start teaches the answer line directly; GRPO then has parsed free replies to
compare. It uses no reward at all (neither the verifier's nor the judge's): the replies are the
base's own, so besides the form it only reinforces the base's own preferences among actions (and its
stated scores), which GRPO then has to move; the self-judged main setting stays self-judged and
nothing from an evaluation seed is read (StateStream refuses them). Measured (trust, 16 examples x 2):
free replies that parse 0% -> 100%; but the base picks one action in ~15 of 16 constrained replies, so
groups of 4 then mostly agree (zero reward variance: the no-signal verdict says so per update).

The examples are written to `<training>/adapters/warm-start/examples.jsonl` with their seed and step; the SFT
pass is TRL's SFTTrainer on the same LoRA model (its losses stored as phase "warm-start"), stopped by
the stop flag like every other phase; a resumed training skips it once GRPO has a checkpoint (the
checkpoint holds the warmed weights) and otherwise continues it from its own checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from s3gym_tui.training.train_types import TrainEvent, TrainResult

WARM_DIR = "warm-start"
PHASE = "warm-start"
EXAMPLES_FILE = "examples.jsonl"


def collect_examples(game: str, seeds: Sequence[int], reply: Callable[[list, Any, int], tuple[str, bool]], count: int,
                     step_cap: Optional[int] = None,
                     fits: Callable[[list], bool] = lambda messages: True) -> list[dict[str, Any]]:
    """Up to `count` conversational prompt/completion examples: the states a player reaches on `seeds`
    (exploration seeds only), answered by `reply(messages, game, k)` -> (text, keep) (game: the state, whose
    action grammar the reply follows; k: the draw's index, its sampling key; keep False: a reply cut before its answer line was complete, played but not kept).
    The player goes on with that reply's action, so the states are the ones it reaches. At most
    4 x `count` states are visited: fewer examples come back when too many replies were cut."""
    from s3gym_tui.training.rollouts import StateStream

    examples: list[dict[str, Any]] = []
    if count <= 0:
        return examples
    where: dict[str, int] = {}
    drawn = [0]

    def player(messages: list, env: Any) -> str:
        from s3gym_tui.training import stop

        label = f"the format warm start: drafting examples ({len(examples)} of {count} kept)"
        stop.set_phase(label)
        stop.check_between(label)  # a requested stop ends the drafting between two drafts
        text, keep = reply(messages, env, drawn[0])
        drawn[0] += 1
        if keep:
            examples.append({"prompt": [dict(m) for m in messages],
                             "completion": [{"role": "assistant", "content": text}],
                             "seed": where["seed"], "step": where["step"]})
        return text

    stream = StateStream(game, seeds, player, step_cap, fits=fits)
    for row in stream.rows():
        if len(examples) >= count or drawn[0] >= 4 * count:
            break
        where["seed"], where["step"] = int(row["seed"]), len(row.get("actions") or ())
    return examples[:count]


def write_examples(directory: Path, examples: Sequence[dict]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / EXAMPLES_FILE
    with open(path, "w", encoding="utf-8") as out:
        for example in examples:
            out.write(json.dumps(example, ensure_ascii=False) + "\n")
    return path


def read_examples(directory: Path) -> Optional[list[dict[str, Any]]]:
    """The examples `write_examples` kept in `directory`, or None when there are none."""
    path = directory / EXAMPLES_FILE
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def warm_start(game: str, seeds: Sequence[int], model: Any, tokenizer: Any, fits: Callable[[list], bool],
               out_dir: Path, config: Any, device: Any, result: TrainResult,
               progress: Callable[[TrainEvent], None], resume: bool) -> dict[str, Any]:
    """The whole warm start of a GRPO training (`config`: its GrpoConfig): the base's own grammar-constrained
    replies at the states it reaches on the exploration seeds (read back on a resume), then the SFT pass;
    returns the figures kept in the training's notes."""
    from s3gym_tui.training.grammar import answer_line
    from s3gym_tui.training.sampling import ReplySampler

    directory = Path(out_dir) / WARM_DIR
    examples = read_examples(directory) if resume else None
    if examples is None:
        # a stream of its own (seeded apart from the rollouts'), keyed by the draw's index: the same examples
        # however often the training is resumed; room for the whole answer line, chess's ~73 tokens too (the
        # constraint ends a reply once its line is complete; one cut before its score is played, not taught)
        drafts = ReplySampler(model, tokenizer, config.temperature, max(config.max_completion_length, 160),
                              seed=config.seed + 7_919, top_p=config.top_p)

        def reply(messages: list, env: Any, k: int) -> tuple[str, bool]:
            ids = drafts.sample(drafts.prompt_ids(messages), answer_line(env.action_grammar()), key=k)
            return drafts.text(ids), ids[-1] == tokenizer.eos_token_id

        examples = collect_examples(game, seeds, reply, config.warm_start, config.rollout_step_cap, fits)
        if not examples:
            raise ValueError(f"the format warm start found no complete answer line in {4 * config.warm_start} "
                             f"replies of the base (try --completion-tokens higher, or --warm-start 0)")
        write_examples(directory, examples)
    return run_warm_start(model, tokenizer, examples, out_dir, epochs=config.warm_start_epochs, config=config,
                          device=device, result=result, progress=progress, resume=resume)


def run_warm_start(model: Any, tokenizer: Any, examples: Sequence[dict], out_dir: Path, *, epochs: int,
                   config: Any, device: Any, result: TrainResult,
                   progress: Callable[[TrainEvent], None], resume: bool) -> dict[str, Any]:
    """One SFT pass (`epochs` over the examples, batch 1) on `model` (already a PEFT model) in place, at the
    recipe's (`config`) learning rate, schedule, seed and precision; returns the figures kept in the
    training's notes."""
    import time

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from s3gym_tui.training.backend import check_tokenized, quiet
    from s3gym_tui.training.hf import (Reporter, compact_lm_head, logs_dir, quiet_trainer, resume_point, run_trainer,
                                       trainer_args)

    directory = Path(out_dir) / WARM_DIR
    checkpoint = resume_point(directory / "trainer") if resume else None
    rows = [{"prompt": e["prompt"], "completion": e["completion"]} for e in examples]
    args = SFTConfig(num_train_epochs=epochs, per_device_train_batch_size=1, gradient_accumulation_steps=1,
                     save_strategy="epoch", save_total_limit=1,
                     **trainer_args(config, device, directory / "trainer", logs_dir(out_dir, PHASE)))
    reporter = Reporter(result, progress, PHASE, saves=False)
    started = time.perf_counter()
    with quiet():
        trainer = quiet_trainer(SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                           processing_class=tokenizer, callbacks=[reporter]))
        check_tokenized(trainer.train_dataset, None)
        progress(TrainEvent("load", max_steps=trainer.state.max_steps or len(rows) * epochs, phase=PHASE))
        with compact_lm_head():
            run_trainer(trainer, checkpoint, PHASE)
    losses = [p.loss for p in result.losses if p.phase == PHASE]
    figures = {"warm_start_examples": len(rows), "warm_start_steps": int(trainer.state.global_step),
               "warm_start_seconds": round(time.perf_counter() - started, 1),
               "warm_start_first_loss": losses[0] if losses else None,
               "warm_start_last_loss": losses[-1] if losses else None}
    del trainer
    return figures
