"""Phase 2 of the consolidation: on-policy distillation with TRL's DistillationTrainer (beta = 1:
reverse KL, mode-seeking). The student samples its own reply to each game prompt and is pulled,
token by token, to the distribution of *that game's* expert.

TRL's trainer takes one teacher. Routing is added here without copying its loss: the teacher is one
PeftModel holding every expert as a named adapter; each generated batch carries a `teacher_route`
tensor (the prompt's game), which TRL shuffles and splits with the rest of the batch, and the
teacher's hidden states are computed per game with that game's adapter active (`routed_hidden`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
from trl import DistillationConfig, DistillationTrainer

from s3gym_tui.training.backend import TrainEvent, TrainResult, load_for_training, quiet, start_training
from s3gym_tui.training.config import DistillConfig


def adapter_name(game: str) -> str:
    return "expert_" + "".join(c if c.isalnum() else "_" for c in game)


def routed_hidden(compute: Callable[..., torch.Tensor], teacher: Any, names: Sequence[str], route: torch.Tensor,
                  input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
    """Teacher hidden states for a batch whose row i belongs to adapter names[route[i]]: each group of
    rows goes through its own expert, and the results are put back in row order."""
    out: Optional[torch.Tensor] = None
    for index in route.unique().tolist():
        rows = (route == index).nonzero(as_tuple=True)[0]
        teacher.set_adapter(names[int(index)])
        hidden = compute(teacher, input_ids[rows], attention_mask[rows], logits_to_keep)
        if out is None:
            out = hidden.new_zeros((input_ids.shape[0], *hidden.shape[1:]))
        out[rows] = hidden
    assert out is not None, "an empty batch"
    return out


class RoutedDistillationTrainer(DistillationTrainer):
    """DistillationTrainer whose teacher is chosen per prompt by its `game` column."""

    def __init__(self, *args: Any, games: Sequence[str], **kwargs: Any) -> None:
        self.route_games = list(games)
        self.route_names = [adapter_name(g) for g in self.route_games]
        self._route: Optional[torch.Tensor] = None
        self.routed_rows: dict[str, int] = {g: 0 for g in self.route_games}  # rows sent to each expert
        super().__init__(*args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        output["teacher_route"] = torch.tensor([self.route_games.index(x["game"]) for x in inputs],
                                               device=output["prompt_ids"].device)
        return output

    def _compute_loss(self, unwrapped_student, inputs, num_items_in_batch):
        self._route = inputs.get("teacher_route")
        try:
            return super()._compute_loss(unwrapped_student, inputs, num_items_in_batch)
        finally:
            self._route = None

    def _get_last_hidden_state(self, unwrapped_model, input_ids, attention_mask, logits_to_keep, **kwargs):
        teacher = self.accelerator.unwrap_model(self.teacher_model)
        if self._route is None or unwrapped_model is not teacher:
            return super()._get_last_hidden_state(unwrapped_model, input_ids, attention_mask, logits_to_keep, **kwargs)
        if kwargs and any(v is not None for v in kwargs.values()):
            raise ValueError("routed distillation is text-only")
        for index in self._route.tolist():
            self.routed_rows[self.route_games[int(index)]] += 1
        parent = super()._get_last_hidden_state
        return routed_hidden(lambda m, ids, mask, keep: parent(m, ids, mask, keep), teacher, self.route_names,
                             self._route, input_ids, attention_mask, logits_to_keep)


def load_teacher(base_dir: Path, experts: dict[str, Path], device: Any) -> Any:
    """One base model with every game's expert adapter loaded under its own name (frozen)."""
    from peft import PeftModel

    teacher, _ = load_for_training(base_dir, device)
    games = list(experts)
    with quiet():
        teacher = PeftModel.from_pretrained(teacher, str(experts[games[0]]), adapter_name=adapter_name(games[0]))
        for game in games[1:]:
            teacher.load_adapter(str(experts[game]), adapter_name=adapter_name(game))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if not device.use_cpu:
        teacher = teacher.to(device.kind)
    return teacher


def all_ranks(counts: dict[str, int]) -> dict[str, int]:
    """Counts summed over every data-parallel process (ranks.py): each routed its own share of rows."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return counts
    names = sorted(counts)
    box = [None] * dist.get_world_size()
    dist.all_gather_object(box, [counts[n] for n in names])
    return {n: sum(int(part[i]) for part in box) for i, n in enumerate(names)}


def train_onpolicy(rows: Sequence[dict], base_dir: Path, experts: dict[str, Path], out_dir: Path, *,
                   updates: int, batch: int, learning_rate: float, max_completion_length: int, temperature: float,
                   beta: float = 1.0, save_every: int = 4, lora: DistillConfig = DistillConfig(),
                   init_adapter: Optional[Path] = None, progress: Callable[[TrainEvent], None] = lambda e: None,
                   resume: bool = False, phase: str = "distill-on") -> tuple[TrainResult, dict[str, int]]:
    """On-policy distillation of a LoRA student (from `init_adapter`, or fresh on the base) towards each
    prompt's own game expert. `rows`: {"prompt": messages, "game": name}. Returns the result and how
    many completions each expert taught. `lora`: the recipe (its adapter, seed, schedule, precision, logs)."""
    from datasets import Dataset
    from peft import PeftModel

    from s3gym_tui.training.hf import (TRAINER_DIR, Reporter, adapted, compact_lm_head, existing_adapters, finish,
                                       logs_dir, quiet_trainer, resume_point, run_trainer, trainer_args)

    missing = sorted({r["game"] for r in rows} - set(experts))
    if missing:
        raise ValueError(f"no expert for game {missing[0]!r}")
    out_dir, device, model, tokenizer = start_training(base_dir, out_dir, lora.use_cpu)
    tokenizer.padding_side = "left"
    with quiet():
        if init_adapter is not None:
            student = PeftModel.from_pretrained(model, str(init_adapter), is_trainable=True)
        else:
            student = adapted(model, lora)
    if not device.use_cpu:
        student = student.to(device.kind)
    teacher = load_teacher(base_dir, experts, device)
    result = TrainResult(base_dir=Path(base_dir), out_dir=out_dir)
    checkpoint = resume_point(out_dir / TRAINER_DIR) if resume else None
    if checkpoint:
        result.adapters.update(existing_adapters(out_dir))
        result.resumed_from = checkpoint
    args = DistillationConfig(
        max_steps=updates, per_device_train_batch_size=batch, gradient_accumulation_steps=1, beta=beta,
        temperature=temperature, max_completion_length=max_completion_length, save_strategy="steps",
        save_steps=save_every, save_total_limit=1, remove_unused_columns=False, log_completions=False,
        **{**trainer_args(lora, device, out_dir / TRAINER_DIR, logs_dir(out_dir, phase)),
           "learning_rate": learning_rate})
    reporter = Reporter(result, progress, phase, save_every=save_every, first_x=len(result.adapters) + 1)
    progress(TrainEvent("load", max_steps=updates, phase=phase))
    games = sorted(experts)
    with quiet():
        trainer = quiet_trainer(RoutedDistillationTrainer(
            model=student, teacher_model=teacher, args=args, games=games,
            train_dataset=Dataset.from_list([{"prompt": r["prompt"], "game": r["game"]} for r in rows]),
            processing_class=tokenizer, callbacks=[reporter]))
        started = time.perf_counter()
        with compact_lm_head():
            run_trainer(trainer, checkpoint, phase)
    result.examples = trainer.state.global_step * batch
    result.tokens = int(trainer.state.num_input_tokens_seen or 0)
    finish(result, trainer, started)
    progress(TrainEvent("done", result.steps, result.steps, phase=phase))
    routed = all_ranks(dict(trainer.routed_rows))
    del trainer, student, teacher, model
    return result, routed
