"""`s3gym export-model TRAINING[/X] -o DIR`: one checkpoint of a local training as a standalone model
directory, the LoRA adapter merged into the base (PEFT's merge_and_unload), with the tokenizer (and
its chat template) and a manifest naming the training, the checkpoint and the base's provenance.
Plain transformers (`AutoModelForCausalLM.from_pretrained(DIR)`) and vLLM load it; nothing of s3gym
or PEFT is needed there. X defaults to the last checkpoint; x = 0 is the base itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.models import int64_problem, whole_number

EXPORT_MANIFEST = "s3gym-export.json"


class ExportError(RuntimeError):
    """The export cannot be made (one line for the user)."""


@dataclass(frozen=True)
class ExportedModel:
    directory: Path
    training_id: str
    x: int
    merged: bool  # an adapter was merged (x > 0); x = 0 is the base as it is
    parameters: int
    manifest: dict[str, Any]


def parse_spec(spec: str) -> tuple[str, Optional[int]]:
    """'ID' or 'ID/X' -> (training id, checkpoint x or None = the last)."""
    training_id, sep, x = spec.strip().rpartition("/")
    if not sep:
        return spec.strip(), None
    number = whole_number(x)
    if number is None:
        raise ExportError(f"{spec!r}: a checkpoint is a number (TRAINING/X, e.g. {training_id}/2)")
    if int64_problem(number):
        raise ExportError(f"{spec!r}: checkpoint {int64_problem(number)}")
    return training_id, number


def check_target(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file: -o names a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} is not empty: choose an empty directory, or --force to write over its files")


def plan(store, spec: str, out: Path, force: bool = False):
    """(training, checkpoint) to export, checked before anything heavy loads."""
    training_id, x = parse_spec(spec)
    training = store.trainings.find_training(training_id)
    if training is None:
        raise ExportError(f"no training {training_id!r} (`s3gym trainings` lists them)")
    if training.backend != "local":
        raise ExportError(f"{training_id} was trained remotely ({training.base}): its model lives at the provider")
    checkpoints = {c.x: c for c in store.trainings.training_checkpoints(training_id)}
    if not checkpoints:
        raise ExportError(f"training {training_id} has no checkpoint yet (status {training.status})")
    if x is None:
        x = max(checkpoints)
    if x not in checkpoints:
        raise ExportError(f"training {training_id} has no checkpoint {x} (it has "
                          f"{', '.join(map(str, sorted(checkpoints)))})")
    checkpoint = checkpoints[x]
    if x > 0 and not (checkpoint.adapter and (Path(checkpoint.adapter) / "adapter_config.json").is_file()):
        raise ExportError(f"checkpoint {training_id}/{x}: its adapter {checkpoint.adapter} is gone")
    if not (Path(training.base) / "config.json").is_file():
        raise ExportError(f"the base of {training_id} ({training.base}) is gone: nothing to merge into")
    check_target(out, force)
    return training, checkpoint


def export_model(store, spec: str, out: Path, force: bool = False) -> ExportedModel:
    """Merge checkpoint X of training ID into its base and save it, standalone, into `out`."""
    from s3gym_tui.training import require_extra

    require_extra()
    training, checkpoint = plan(store, spec, Path(out), force)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from s3gym_tui.training.backend import quiet
    from s3gym_tui.training.provenance import base_info

    base = Path(training.base)
    with quiet():
        tokenizer = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        merged = bool(checkpoint.adapter) and checkpoint.x > 0
        if merged:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, checkpoint.adapter).merge_and_unload()
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    manifest = {
        "training_id": training.id, "method": training.method, "games": list(training.games), "x": checkpoint.x,
        "step": checkpoint.step, "adapter": checkpoint.adapter, "merged": merged, "dtype": "float32",
        "served_as": f"trained/{training.id}/{checkpoint.x}", "base": base_info(base),
        "load": f"transformers.AutoModelForCausalLM.from_pretrained('{out.resolve()}') or vllm serve {out.resolve()}",
    }
    (out / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    parameters = sum(p.numel() for p in model.parameters())
    return ExportedModel(out, training.id, checkpoint.x, merged, parameters, manifest)
