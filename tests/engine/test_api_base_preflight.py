"""Doomed runs against a served model are refused before anything is stored (issue 36): an `openai/…`
model with `--api-base` and no OPENAI_API_KEY (litellm's client refuses to call without one, and the
run failed after storing itself), and an api base that is not a server's URL (`'::::'`)."""

from __future__ import annotations

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.preflight import ModelRefused, check_model
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI


@pytest.fixture
def no_openai_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_openai_model_on_a_local_server_without_its_key_is_refused_saying_what_to_set(
        tmp_path, capsys, no_openai_key):
    db = tmp_path / "runs.db"
    with FakeOpenAI(kind="plain") as fake:
        code, out, err = run_cli(capsys, "run", "trust", "-m", "openai/smollm2", "--api-base", fake.base,
                                 "--episodes", "1", "--eval-episodes", "0", "--db", str(db))
        assert fake.requests == []  # no call was made
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "OPENAI_API_KEY" in err and "any value" in err and "nothing was stored" in err
    assert not db.exists()


def test_a_model_that_needs_no_key_is_not_asked_for_one(no_openai_key):
    check_model("hosted_vllm/smollm2", "trust", "http://127.0.0.1:8000/v1")  # no exception


@pytest.mark.parametrize("base", ["::::", "127.0.0.1:8080", "http://", "http://host:99999/v1", "ftp://host/v1"])
def test_an_api_base_that_is_not_a_url_is_refused_in_one_line(base, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "anything")
    with pytest.raises(ModelRefused, match="is not a server's URL: write http://HOST:PORT/v1") as refused:
        check_model("openai/smollm2", "trust", base)
    assert "\n" not in str(refused.value)


def test_a_malformed_api_base_stores_nothing_from_run_or_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "anything")
    db = tmp_path / "runs.db"
    code, out, err = run_cli(capsys, "run", "trust", "-m", "openai/smollm2", "--api-base", "::::",
                             "--db", str(db))
    assert code == 2 and "'::::' is not a server's URL" in err and "nothing was stored" in err
    assert "server" not in out  # refused before the server was asked
    code, _, err = run_cli(capsys, "sweep", "--games", "trust", "--pathways", "none", "-m", "openai/smollm2",
                           "--api-base", "http://127.0.0.1:1/v1,::::", "--yes", "--db", str(db))
    assert code == 2 and "'::::' is not a server's URL" in err and len(err.strip().splitlines()) == 1
    assert not db.exists()


def test_credentials_in_a_malformed_api_base_are_not_repeated(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "anything")
    with pytest.raises(ModelRefused) as refused:
        check_model("openai/smollm2", "trust", "http://user:hunter2-secret@host:notaport/v1")
    assert "hunter2" not in str(refused.value)


def test_a_stored_run_with_a_working_base_is_unchanged(tmp_path, capsys, monkeypatch):
    """The check sits before storing: what a run stores is the same as before."""
    monkeypatch.setenv("OPENAI_API_KEY", "anything")
    db = tmp_path / "runs.db"
    with FakeOpenAI(kind="plain", reply="Answer: collaborate, Score: 1") as fake:
        code, _, err = run_cli(capsys, "run", "trust", "-m", "openai/smollm2", "--api-base", fake.base,
                               "--episodes", "1", "--eval-episodes", "0", "--step-cap", "1",
                               "--progress", "none", "--db", str(db))
    assert code == 0, err
    with Store(db) as store:
        [run] = store.runs.list_runs()
    assert run.config.api_base == fake.base
