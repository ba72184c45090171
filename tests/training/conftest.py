"""Fixtures for the training tests: a fresh store, private training/cache dirs, a tiny random model with
SmolLM2's real tokenizer (so serving and LoRA mechanics run in seconds), one event loop for litellm."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from s3gym_tui.store import Store


def pytest_collection_modifyitems(items):
    """One event loop for the async tests here: litellm's logging worker binds to the first loop."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"))


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    """Trainings write under the test's tmp dir, never the user's data dir."""
    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(tmp_path / "training"))


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "t.db")
    yield s
    s.close()


@pytest.fixture(scope="session")
def default_base_cache(tmp_path_factory):
    """An S3GYM_CACHE holding the embedded GGUF converted for real (training/backend.py), once per test
    run: the first test to ask converts it, a test in another xdist worker waits on the lock and reads
    the same directory (the conversion took minutes under load; the trainings only read it)."""
    pytest.importorskip("transformers")
    from filelock import FileLock

    from s3gym_tui.training.backend import resolve_base

    shared = _run_wide(tmp_path_factory)
    cache = shared / "s3gym-cache"
    with FileLock(str(shared / "s3gym-cache.lock")):
        resolve_base(cache=cache)
    return cache


def _run_wide(tmp_path_factory) -> Path:
    """This test run's temporary directory, the same for every xdist worker."""
    here = tmp_path_factory.getbasetemp()
    return here.parent if os.environ.get("PYTEST_XDIST_WORKER") else here


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    """A 1-layer random Llama with the embedded model's tokenizer and chat template, saved as an HF dir
    once a run: the first worker to ask makes it, another waits on the lock and reads it (the tokenizer
    read from the GGUF took ~10 s of CPU in each worker; the tests only read the directory)."""
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from filelock import FileLock

    shared = _run_wide(tmp_path_factory)
    path = shared / "tiny-base"
    with FileLock(str(shared / "tiny-base.lock")):
        done = shared / "tiny-base.complete"  # written last: without it the directory is made (again)
        if not done.is_file():
            _make_tiny_base(path)
            done.write_text("made", encoding="utf-8")
    return path


def _make_tiny_base(path: Path) -> None:
    import shutil

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from s3gym_tui.training.backend import embedded_gguf, quiet

    shutil.rmtree(path, ignore_errors=True)
    gguf = embedded_gguf()
    with quiet():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    with quiet():
        LlamaForCausalLM(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
