"""TRL's fused LM head on the CPU, under compact_lm_head: only the positions that have a label are
projected (TRL alone projects every position off Triton devices, the prompt included), with the same
loss and gradients; and the local SFT trainer trains under it."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.training.dataset import build_dataset, training_examples
from train_helpers import add_trust_episode, trust_run

pytest.importorskip("peft")
trl = pytest.importorskip("trl")


@pytest.fixture
def projected_rows(monkeypatch):
    """Rows of every projection through TRL's chunked log-prob function (the fused head's kernel)."""
    import trl.trainer.utils as trl_utils

    rows = []
    original = trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden, *args):
            rows.append(hidden.shape[0])
            return original.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)
    return rows


def _fused_loss(tiny_base, labels_from: int):
    """Loss and LoRA-free gradient of the tiny base's fused head on 12 tokens, the first `labels_from` unscored."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    ids = torch.randint(0, 1000, (1, 12))
    labels = ids.clone()
    labels[:, :labels_from] = -100
    out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    out.loss.backward()
    grad = model.model.layers[0].mlp.down_proj.weight.grad.clone()
    return out.loss.detach(), grad, out


def test_compact_head_projects_only_the_scored_positions_with_the_same_loss(tiny_base, projected_rows):
    import torch

    from s3gym_tui.training.hf import compact_lm_head

    loss, grad, _ = _fused_loss(tiny_base, labels_from=8)
    assert projected_rows == [11]  # every next-token position, the unscored prompt included
    with compact_lm_head():
        compact_loss, compact_grad, out = _fused_loss(tiny_base, labels_from=8)
    assert projected_rows[1:] == [4]  # positions 8..11 predict a labelled token
    assert torch.allclose(loss, compact_loss, atol=1e-6) and torch.allclose(grad, compact_grad, atol=1e-6)
    assert out.label_mask.sum().item() == 4 and out.entropy.shape == out.log_probs.shape == (1, 11)
    _fused_loss(tiny_base, labels_from=8)
    assert projected_rows[2:] == [11]  # the switch is TRL's own again outside the block


def test_local_sft_projects_only_the_reply_tokens(tiny_base, tmp_path, store, projected_rows):
    from s3gym_tui.training.backend import train_lora
    from s3gym_tui.training.config import SftConfig

    run = trust_run(store)
    add_trust_episode(store, run, [("collaborate", 2.0, None), ("cheat", 3.0, None)])
    examples = training_examples(store, asyncio.run(build_dataset(store, run.id)).dataset.id)
    result = train_lora(examples, tiny_base, tmp_path / "adapters", SftConfig(epochs=1, grad_accum=1))
    assert result.steps == 2 and result.tokens > 200
    # per example, the reply's tokens (a few dozen), never the whole prompt + reply
    assert len(projected_rows) >= 2 and max(projected_rows) < 60, projected_rows


def test_the_switch_is_patched_in_every_trl_module_that_has_a_fused_head_and_restored():
    import importlib

    import torch

    from s3gym_tui.training.hf import _FUSED_HEAD_MODULES, compact_lm_head

    modules = [importlib.import_module(name) for name in _FUSED_HEAD_MODULES]
    originals = [m._use_triton for m in modules]  # an upgraded TRL without it fails here, not silently
    cpu = torch.device("cpu")
    assert not any(f(cpu) for f in originals)
    with compact_lm_head():
        assert all(m._use_triton(cpu) for m in modules)
    assert [m._use_triton for m in modules] == originals
