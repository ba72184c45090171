"""A LoRA adapter attached by training/hf.adapted (GRPO, on-policy distillation) starts from weights the
recipe's seed decides, whatever the process drew from torch's generator before (an earlier training in
the same process, a sampler): a stopped training and its uninterrupted twin start alike."""

from __future__ import annotations

import pytest

pytest.importorskip("peft")


def _fresh_lora(tiny_base, seed: int, drawn_before: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from s3gym_tui.training.config import GrpoConfig
    from s3gym_tui.training.hf import adapted

    torch.rand(drawn_before)  # what the process used the generator for before this training
    model = adapted(AutoModelForCausalLM.from_pretrained(tiny_base), GrpoConfig(base=str(tiny_base), seed=seed))
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


def test_the_adapters_initial_weights_follow_the_recipes_seed_not_what_the_process_drew_before(tiny_base):
    import torch

    first = _fresh_lora(tiny_base, seed=0, drawn_before=1)
    again = _fresh_lora(tiny_base, seed=0, drawn_before=1000)
    other = _fresh_lora(tiny_base, seed=1, drawn_before=1)
    randomised = [name for name in first if "lora_A" in name]
    assert randomised and first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert all(not torch.equal(first[name], other[name]) for name in randomised)  # the seed does decide them
