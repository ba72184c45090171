"""The local backend and the `trained` provider, on a tiny random model with the real tokenizer:
LoRA mechanics (one adapter per epoch, loss per step), serving through litellm with the answer
contract enforced for every game (a random model is the worst case for the repair path)."""

from __future__ import annotations

import math

import pytest

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_tui.providers import is_builtin, make_context
from s3gym_tui.training.dataset import build_dataset, training_examples
from s3gym_tui.training.grammar import action_is_wellformed
from train_helpers import add_trust_episode, trust_run

pytest.importorskip("peft")
pytest.importorskip("trl")

SPECS = [("collaborate", 2.0, None), ("collaborate", 1.0, None), ("cheat", 3.0, None), ("cheat", 1.0, None)]


@pytest.fixture(scope="module")
def tiny_training(tiny_base, tmp_path_factory):
    """Two epochs of LoRA on the tiny base (4 examples, batch 2): (result, events)."""
    import asyncio

    from s3gym_tui.store import Store
    from s3gym_tui.training.backend import train_lora
    from s3gym_tui.training.config import SftConfig

    folder = tmp_path_factory.mktemp("tiny-train")
    store = Store(folder / "t.db")
    run = trust_run(store)
    add_trust_episode(store, run, SPECS)
    build = asyncio.run(build_dataset(store, run.id))
    examples = training_examples(store, build.dataset.id)
    store.close()
    events = []
    result = train_lora(examples, tiny_base, folder / "adapters",
                        SftConfig(epochs=2, batch_size=2, grad_accum=1, learning_rate=1e-2), events.append)
    return result, events


def test_one_adapter_per_epoch_and_a_loss_per_step(tiny_training):
    result, events = tiny_training
    assert result.examples == 8 and result.steps == 4  # 4 examples seen twice
    assert result.tokens > 8 * 100 and result.examples_per_s > 0 and result.tokens_per_s > 0
    assert result.peak_rss_mb > 100 and result.steps_at == {1: 2, 2: 4}
    assert sorted(result.adapters) == [1, 2]
    for path in result.adapters.values():
        assert (path / "adapter_config.json").is_file() and (path / "adapter_model.safetensors").is_file()
    kinds = [e.kind for e in events]
    assert kinds[0] == "load" and kinds[-1] == "done"
    assert kinds.count("step") == 4 and kinds.count("checkpoint") == 2
    assert [e.step for e in events if e.kind == "step"] == [1, 2, 3, 4]
    assert [e.adapter_dir for e in events if e.kind == "checkpoint"] == [result.adapters[1], result.adapters[2]]
    assert [p.step for p in result.losses] == [1, 2, 3, 4] and all(math.isfinite(p.loss) for p in result.losses)
    assert all(p.phase == "sft" and "mean_token_accuracy" in p.metrics for p in result.losses)


def test_training_refuses_an_empty_dataset_and_a_base_that_is_not_a_model(tiny_base, tmp_path):
    from s3gym_tui.training.backend import resolve_base, train_lora

    with pytest.raises(ValueError, match="no examples"):
        train_lora([], tiny_base, tmp_path / "x")
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve_base(str(tmp_path))
    assert resolve_base(str(tiny_base)) == tiny_base


@pytest.fixture
def served(tiny_training, tiny_base):
    from s3gym_tui.training import serve

    result, _ = tiny_training
    serve.HANDLER.add_training("tiny-run", tiny_base, result.adapters)
    serve.register()
    return serve


def _context(game: str, seed: int = 0) -> dict:
    env = games.make(game, "eval")
    env.reset(seed)
    return make_context("act", game, "eval", seed, [], grammar=env.action_grammar())


@pytest.mark.parametrize("game", games.names())
async def test_replies_as_written_and_repaired_replies_follow_the_contract_for_every_game(served, game):
    import litellm

    ctx = _context(game)
    env = games.make(game, "eval")
    env.reset(0)
    messages = [{"role": "system", "content": env.rules()}, {"role": "user", "content": env.observation()}]
    for epoch in (0, 2):
        written = await litellm.acompletion(model=f"trained/tiny-run/{epoch}", max_tokens=400, temperature=0,
                                            messages=messages, extra_body={"s3gym": ctx})
        info = written._hidden_params["s3gym"]
        assert info["task"] == "act" and info["repaired"] is False  # never repaired unless asked
        response = await litellm.acompletion(model=f"trained/tiny-run/{epoch}/repair", max_tokens=400, temperature=0,
                                             messages=messages, extra_body={"s3gym": ctx})
        reply = response.choices[0].message.content
        parsed = parse_reply(reply)
        assert parsed.action is not None and parsed.self_score is not None, reply
        assert action_is_wellformed(parsed.action, ctx["grammar"]), reply
        assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
        info = response._hidden_params["s3gym"]
        assert info["task"] == "act" and isinstance(info["repaired"], bool)
        if info["repaired"]:  # the free reply is the one written without repair (greedy: the same text)
            assert info["free_reply"] == written.choices[0].message.content
        else:
            assert reply == written.choices[0].message.content


async def test_the_engine_reaches_it_and_keeps_the_written_reply_of_a_repair(served):
    from s3gym_tui.engine.llm import CallSettings, complete

    messages = [{"role": "user", "content": "Round 1. collaborate or cheat?"}]
    written = await complete(CallSettings(model="trained/tiny-run/1", max_tokens=100), messages, _context("trust"))
    assert written.original_reply is None
    result = await complete(CallSettings(model="trained/tiny-run/1/repair", max_tokens=100), messages,
                            _context("trust"))
    assert parse_reply(result.reply).action in ("collaborate", "cheat")
    if parse_reply(written.reply).action not in ("collaborate", "cheat"):  # the random model: repaired
        assert result.original_reply == written.reply and result.reply != written.reply
    # without a task (plain chat) there is no constraint, just a bounded completion
    chat = await complete(CallSettings(model="trained/tiny-run/0", max_tokens=5), [{"role": "user", "content": "hi"}])
    assert chat.tokens_out <= 5


async def test_clear_errors_for_unknown_trainings_epochs_and_names(served):
    from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete

    for model, needle in (("trained/tiny-run/7", "has no checkpoint 7"), ("trained/nope/1", "unknown training 'nope'"),
                          ("trained/tiny-run", "trained/<training_id>/<checkpoint>")):
        with pytest.raises(ModelUnavailable, match=needle):
            await complete(CallSettings(model=model, max_retries=0), [{"role": "user", "content": "x"}])


async def test_a_fresh_process_finds_the_training_by_its_manifest(tiny_training, tiny_base, tmp_path, monkeypatch):
    from s3gym_tui.training.runs import write_manifest
    from s3gym_tui.training.serve import TrainedLLM

    result, _ = tiny_training
    monkeypatch.setenv("S3GYM_TRAINING_DIR", str(tmp_path))
    (tmp_path / "from-disk").mkdir()
    write_manifest(tmp_path / "from-disk", "from-disk", tiny_base, result.adapters)
    handler = TrainedLLM()
    served, epoch = handler.resolve("from-disk/2")
    assert epoch == 2 and served.adapters == {k: v.resolve() for k, v in result.adapters.items()}
    out = handler.generate("from-disk/2/repair", [{"role": "user", "content": "go"}], _context("snake"),
                           {"max_tokens": 40})
    assert parse_reply(out["text"]).self_score is not None


def test_trained_model_strings_are_builtin_and_registered_next_to_the_others():
    import litellm

    from s3gym_tui import providers
    from s3gym_tui.training import serve

    assert is_builtin("trained/trust-trained-ab12/0") and is_builtin("trained/x.y:z/12")
    assert not is_builtin("trained/run-1") and not is_builtin("trained//1") and not is_builtin("trained/a/b")
    serve.register()
    serve.register()
    names = [e["provider"] for e in litellm.custom_provider_map]
    assert sorted(names) == sorted(set(names)) and {"local", "scripted", "fault", "trained"} <= set(names)
    assert "trained" in providers.PROVIDERS


FRESH_PROCESS = """
import asyncio, sys
from s3gym_tui.engine.llm import CallSettings, complete
from s3gym_games.reply import parse_reply
ctx = {"task": "act", "game": "trust", "mode": "eval", "seed": 1000000, "actions": [],
       "grammar": '"collaborate" | "cheat"'}
result = asyncio.run(complete(CallSettings(model="trained/from-disk/1/repair", max_tokens=40, max_retries=0),
                              [{"role": "user", "content": "Round 1. collaborate or cheat?"}], ctx))
assert parse_reply(result.reply).action in ("collaborate", "cheat"), result.reply
assert not any(m.startswith("s3gym_tui.cli") for m in sys.modules)  # nothing but the engine was imported
print("ok")
"""


def test_any_process_serves_a_training_by_name(tiny_training, tiny_base, tmp_path):
    """A process that only uses the engine finds `trained/<id>/<x>`: the providers package loads the
    plugin by name and the handler reads the training's manifest."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from s3gym_tui.training.runs import write_manifest

    result, _ = tiny_training
    write_manifest(tmp_path / "from-disk", "from-disk", tiny_base, result.adapters)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(root), S3GYM_TRAINING_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
