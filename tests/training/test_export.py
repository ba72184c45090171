"""The JSONL export: loadable by `datasets`, conversational for TRL (its own checks and its own
tokenisation, with the loss on the reply only), and in OpenAI's fine-tuning chat format."""

from __future__ import annotations

import json
import logging

import pytest

from s3gym_tui.training.dataset import build_dataset, export_jsonl, training_examples
from train_helpers import add_trust_episode, trust_run

SPECS = [("collaborate", 2.0, None), ("cheat", 0.0, None), ("collaborate", 1.5, None), ("cheat", -1.0, None)]
OPENAI_ROLES = {"system", "user", "assistant"}


def check_openai_example(example: dict) -> None:
    """OpenAI chat fine-tuning format: {"messages": [...]} only, known roles, string contents, and
    the example ends with the assistant's reply (the part that is trained)."""
    assert set(example) == {"messages"}
    messages = example["messages"]
    assert isinstance(messages, list) and len(messages) >= 2
    for message in messages:
        assert set(message) == {"role", "content"}
        assert message["role"] in OPENAI_ROLES
        assert isinstance(message["content"], str) and message["content"]
    assert messages[-1]["role"] == "assistant"


@pytest.fixture
async def exported(store, tmp_path):
    run = trust_run(store)
    add_trust_episode(store, run, SPECS, index=0)
    add_trust_episode(store, run, SPECS, index=1)
    build = await build_dataset(store, run.id, threshold=0.0, correction="reference")
    return build, export_jsonl(store, build.dataset.id, tmp_path / "export")


async def test_both_files_hold_every_kept_and_corrected_row(store, exported):
    build, files = exported
    assert files.count == build.dataset.counts["kept"] + build.dataset.counts["corrected"] == 8
    pc = [json.loads(line) for line in files.prompt_completion.read_text(encoding="utf-8").splitlines()]
    msgs = [json.loads(line) for line in files.messages.read_text(encoding="utf-8").splitlines()]
    assert len(pc) == len(msgs) == files.count
    for a, b in zip(pc, msgs):
        assert set(a) == {"prompt", "completion", "episode_id", "step"}
        assert a["prompt"] + a["completion"] == b["messages"]
        assert [m["role"] for m in a["completion"]] == ["assistant"]
        assert a["completion"][0]["content"].rsplit("\n", 1)[-1].startswith("Answer: ")
        check_openai_example(b)
    assert [{"prompt": a["prompt"], "completion": a["completion"]} for a in pc] == training_examples(
        store, build.dataset.id)
    # each line joins back to the step it came from: its prompt is the one stored with that step
    for a in pc:
        step = next(s for s in store.episodes.steps(a["episode_id"]) if s.index == a["step"])
        assert a["prompt"] == json.loads(store.prompts.step_prompt(step.episode_id, step.index))
    assert len({(a["episode_id"], a["step"]) for a in pc}) == len(pc)


async def test_datasets_loads_them_and_trl_sees_conversational_data(exported):
    datasets = pytest.importorskip("datasets")
    trl_data = pytest.importorskip("trl.data_utils")
    _, files = exported
    pc = datasets.load_dataset("json", data_files=str(files.prompt_completion), split="train")
    msgs = datasets.load_dataset("json", data_files=str(files.messages), split="train")
    assert pc.column_names == ["prompt", "completion", "episode_id", "step"] and msgs.column_names == ["messages"]
    assert len(pc) == len(msgs) == files.count
    assert all(trl_data.is_conversational(row) for row in pc)
    assert all(trl_data.is_conversational(row) for row in msgs)


async def test_trl_tokenises_the_prompt_completion_file_with_loss_on_the_reply_only(exported, tiny_base, tmp_path,
                                                                                      caplog):
    """SFTTrainer's own preparation of the exported file: no conversion needed, the prompt is an exact
    prefix of prompt + reply (no TRL warning), and only the reply tokens carry the loss."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from s3gym_tui.training.backend import quiet

    _, files = exported
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    with quiet():
        model = AutoModelForCausalLM.from_pretrained(tiny_base)
        data = datasets.load_dataset("json", data_files=str(files.prompt_completion), split="train")
        with caplog.at_level(logging.WARNING):
            trainer = trl.SFTTrainer(model=model, processing_class=tokenizer, train_dataset=data,
                                     args=trl.SFTConfig(output_dir=str(tmp_path / "o"), use_cpu=True, bf16=False,
                                                        report_to="none", activation_checkpointing=False))
    assert "not a prefix" not in caplog.text
    prepared = trainer.train_dataset
    assert {"input_ids", "labels"} <= set(prepared.column_names)
    for raw, row in zip(data, prepared):
        reply = raw["completion"][0]["content"]
        trained = [t for t, label in zip(row["input_ids"], row["labels"]) if label != -100]
        assert tokenizer.decode(trained).strip().startswith(reply)  # the reply (then the end-of-turn token)
        assert len(trained) < len(row["input_ids"]) / 4  # the long prompt carries no loss
        first = next(i for i, label in enumerate(row["labels"]) if label != -100)
        assert all(label != -100 for label in row["labels"][first:])  # one block: the reply, at the end


def test_s3gym_dataset_writes_the_two_files_alone(tmp_path, capsys, tiny_base):
    """`s3gym dataset RUN -o DIR`: the JSONL without a training, lengths measured, too-long rows named."""
    from s3gym_tui.cli import main
    from s3gym_tui.store import Store

    db = tmp_path / "d.db"
    with Store(db) as store:
        run = trust_run(store)
        add_trust_episode(store, run, SPECS, index=0)
        add_trust_episode(store, run, SPECS, index=1)
    out_dir = tmp_path / "jsonl"
    code = main(["dataset", run.id, "-o", str(out_dir), "--base", str(tiny_base), "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    files = sorted(p.name for p in out_dir.iterdir())
    assert len(files) == 2 and files[0].endswith(".messages.jsonl") and files[1].endswith(".prompt_completion.jsonl")
    lines = (out_dir / files[1]).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and "wrote 4 examples" in out.out  # self-score > 0: two per episode
    with Store(db) as store:
        for line in map(json.loads, lines):  # `s3gym dataset` lines join back to their steps in the store
            (step,) = [s for s in store.episodes.steps(line["episode_id"]) if s.index == line["step"]]
            assert line["completion"][0]["content"] == step.reply and step.self_score > 0
            assert store.episodes.get_episode(line["episode_id"]).run_id == run.id
        assert store.trainings.list() == [] and len(store.runs.list_runs()) == 1  # no training, nothing else
        (dataset,) = store.datasets.list(run.id)
        kept = [r for r in store.datasets.dataset_rows(dataset.id) if r.kind == "kept"]
        assert all(r.tokens for r in kept)
        limit = sorted(r.tokens for r in kept)[1]
    code = main(["dataset", run.id, "-o", str(tmp_path / "short"), "--base", str(tiny_base), "--max-length",
                 str(limit), "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0 and "longer than the limit" in out and "wrote 2 examples" in out
    assert "episode 0 step 2" in out or "episode 1 step 2" in out  # named by where they come from
    code = main(["dataset", "no-such-run", "-o", str(tmp_path / "x"), "--db", str(db)])
    assert code == 2 and "no run 'no-such-run'" in capsys.readouterr().err
    assert main(["dataset", run.id, "--db", str(db)]) == 2  # -o is required
