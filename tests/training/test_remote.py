"""The remote backend against a fake fine-tuning API (litellm's acreate_file, acreate_fine_tuning_job
and aretrieve_fine_tuning_job monkeypatched), alone, through the pipeline and through `s3gym train`."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.training.config import RecipeError, SftConfig, build
from s3gym_tui.training.pipeline import TrainingError, train_from_run
from s3gym_tui.training.remote import RemoteTrainingError, fine_tune_remote, split_remote_model

TUNED = "ft:gpt-4o-mini-2024-07-18:acme::s3gym01"


class FakeFineTuning:
    """Records every call; the job goes through `statuses` one poll at a time."""

    def __init__(self, statuses=("validating_files", "running", "succeeded"), error=None, fail_upload=None):
        self.statuses = list(statuses)
        self.error = error
        self.fail_upload = fail_upload
        self.calls: list[tuple[str, dict]] = []
        self.uploaded = b""

    def job(self):
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return SimpleNamespace(id="ftjob-1", status=status, trained_tokens=1234,
                               fine_tuned_model=TUNED if status == "succeeded" else None,
                               error=SimpleNamespace(message=self.error) if self.error else None)

    async def acreate_file(self, file, purpose, custom_llm_provider="openai", **kwargs):
        if self.fail_upload:
            raise self.fail_upload
        self.uploaded = file.read()
        self.calls.append(("acreate_file", {"purpose": purpose, "custom_llm_provider": custom_llm_provider}))
        return SimpleNamespace(id="file-1", purpose=purpose)

    async def acreate_fine_tuning_job(self, **kwargs):
        self.calls.append(("acreate_fine_tuning_job", kwargs))
        return self.job()

    async def aretrieve_fine_tuning_job(self, **kwargs):
        self.calls.append(("aretrieve_fine_tuning_job", kwargs))
        return self.job()


@pytest.fixture
def fake(monkeypatch):
    import litellm

    from s3gym_tui.training import remote

    monkeypatch.setattr(remote, "POLL_S", 0.0)
    api = FakeFineTuning()
    for name in ("acreate_file", "acreate_fine_tuning_job", "aretrieve_fine_tuning_job"):
        monkeypatch.setattr(litellm, name, getattr(api, name))
    return api


@pytest.fixture
def offline_openai(monkeypatch):
    """Chat calls to openai/* answer from litellm's own mock (no network): a fixed Trust move."""
    import litellm

    original = litellm.acompletion
    seen = []

    async def acompletion(**kwargs):
        if str(kwargs.get("model", "")).startswith("openai/"):
            seen.append(kwargs["model"])
            kwargs["mock_response"] = "Answer: collaborate, Score: 2"
        return await original(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    return seen


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "d.messages.jsonl"
    line = {"messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": "Answer: cheat, Score: 3"}]}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


async def test_upload_create_poll(fake, jsonl):
    statuses = []
    result = await fine_tune_remote(jsonl, "openai/gpt-4o-mini-2024-07-18", epochs=3, poll_s=0,
                                    progress=lambda status, job: statuses.append(status))
    assert [c[0] for c in fake.calls] == ["acreate_file", "acreate_fine_tuning_job", "aretrieve_fine_tuning_job",
                                          "aretrieve_fine_tuning_job"]
    assert fake.calls[0][1] == {"purpose": "fine-tune", "custom_llm_provider": "openai"}
    create = fake.calls[1][1]
    assert (create["model"], create["training_file"], create["hyperparameters"], create["custom_llm_provider"]) == (
        "gpt-4o-mini-2024-07-18", "file-1", {"n_epochs": 3}, "openai")
    assert all(c[1]["fine_tuning_job_id"] == "ftjob-1" for c in fake.calls[2:])
    assert fake.uploaded == jsonl.read_bytes()
    assert statuses == ["validating_files", "running", "succeeded"]
    assert (result.status, result.job_id, result.file_id, result.trained_tokens) == (
        "succeeded", "ftjob-1", "file-1", 1234)
    assert result.base_model == "openai/gpt-4o-mini-2024-07-18" and result.fine_tuned_model == f"openai/{TUNED}"


async def test_a_failed_job_a_refused_upload_and_a_timeout_are_one_line_errors(fake, jsonl):
    fake.statuses, fake.error = ["running", "failed"], "Training file has 1 example(s), but must have at least 10"
    with pytest.raises(RemoteTrainingError, match="ftjob-1 failed: Training file has 1 example"):
        await fine_tune_remote(jsonl, "gpt-4o-mini", poll_s=0)
    fake.fail_upload = RuntimeError("AuthenticationError: Incorrect API key\nprovided")
    with pytest.raises(RemoteTrainingError,
                       match="openai fine-tuning: AuthenticationError: Incorrect API key provided"):
        await fine_tune_remote(jsonl, "gpt-4o-mini", poll_s=0)
    fake.fail_upload, fake.error, fake.statuses = None, None, ["running"]
    with pytest.raises(RemoteTrainingError, match="still running"):
        await fine_tune_remote(jsonl, "gpt-4o-mini", poll_s=0, timeout_s=0)


@pytest.mark.parametrize("model, expected", [("gpt-4o-mini", ("openai", "gpt-4o-mini")),
                                             ("azure/my-deploy", ("azure", "my-deploy")),
                                             ("vertex_ai/gemini-2.0-flash", ("vertex_ai", "gemini-2.0-flash"))])
def test_provider_split(model, expected):
    assert split_remote_model(model) == expected


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4", "openai/", "ollama/llama3"])
def test_providers_without_a_fine_tuning_api_are_refused(model):
    with pytest.raises(RemoteTrainingError):
        split_remote_model(model)


@pytest.fixture
async def explored(store):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                          eval_every=1, eval_episodes=1))
    return await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()


async def test_the_pipeline_with_the_remote_backend(store, explored, fake, offline_openai, tmp_path):
    options = SftConfig(backend="remote", remote_model="openai/gpt-4o-mini-2024-07-18", eval_episodes=1,
                        step_cap=2, epochs=2)
    outcome = await train_from_run(store, explored.id, options, out_dir=tmp_path / "out")
    lines = outcome.exported.messages.read_bytes()
    assert fake.uploaded == lines and len(lines.splitlines()) == outcome.exported.count == 10
    run = outcome.run
    assert run.config.pathway == "trained" and run.config.checkpoints() == [0, 2]
    assert run.config.model == f"openai/{TUNED}"
    report = outcome.report
    training = store.trainings.get_training(outcome.training.id)
    assert training.backend == "remote" and training.remote_job == "ftjob-1" and training.status == "finished"
    assert training.base == "openai/gpt-4o-mini-2024-07-18" and training.epochs == 2
    assert [(r.epoch, r.model) for r in report.rows] == [(0, "openai/gpt-4o-mini-2024-07-18"), (2, f"openai/{TUNED}")]
    assert set(offline_openai) == {"openai/gpt-4o-mini-2024-07-18", f"openai/{TUNED}"}
    assert [e.model for e in store.episodes.list(run.id)] == ["openai/gpt-4o-mini-2024-07-18", f"openai/{TUNED}"]


async def test_the_remote_backend_needs_a_model(store, explored):
    with pytest.raises(RecipeError, match="--backend remote needs --remote-model"):
        build("sft", {"backend": "remote"})


def test_s3gym_train_remote(tmp_path, capsys, fake, offline_openai):
    from s3gym_tui.store import Store

    db = tmp_path / "r.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                              eval_every=1, eval_episodes=1))
    import asyncio

    with Store(db) as store:
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    code = main(["train", run.id, "--backend", "remote", "--remote-model", "openai/gpt-4o-mini-2024-07-18",
                 "--eval-episodes", "1", "--step-cap", "2", "--out", str(tmp_path / "o"), "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "checkpoints of trust-sft-" in out.out and "ft:gpt-4o-mini" in out.out
    assert "sft training" in out.out
