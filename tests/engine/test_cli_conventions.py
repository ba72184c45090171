"""CLI conventions: --version, --json, distinct documented exit codes, every environment variable
in --help, `run` honours the configured default model, Datasette metadata, export's JSON prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.cli.common import ENV_VARS, EXIT_CODES, console
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version(capsys):
    from importlib.metadata import version

    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"s3gym {version('s3gym')}"


def test_help_documents_every_exit_code_and_every_environment_variable(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for number, text in EXIT_CODES:
        assert re.search(rf"^\s+{number}\s+{re.escape(text)}$", out, re.MULTILINE), number
    assert [n for n, _ in EXIT_CODES] == [0, 1, 2, 3, 130]
    for name, _ in ENV_VARS:
        assert name in out
    # every S3GYM_ variable the code reads is listed (in --help and in the command line conventions)
    conventions = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    read = set()
    for path in (ROOT / "s3gym_tui").rglob("*.py"):
        read |= set(re.findall(r"\"(S3GYM_[A-Z_]+)\"", path.read_text(encoding="utf-8")))
    assert read >= {"S3GYM_DB", "S3GYM_CONFIG", "S3GYM_MODEL", "S3GYM_THEME", "S3GYM_TRAINING_DIR"}
    for name in read:
        assert name in out and name in conventions, name
    for number, _ in EXIT_CODES:
        assert re.search(rf"\|\s*{number}\s*\|", conventions), number


def test_exit_codes_are_distinct_by_cause(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "x.db")
    assert run_cli(capsys, "run", "trust", "--no-such-flag", "--db", db)[0] == 2  # usage
    assert run_cli(capsys, "run", "go", "--db", db)[0] == 2  # refused before anything is stored
    with FakeOpenAI().behave(status=401) as server:  # the provider refuses while the run works
        code, _, err = run_cli(capsys, "run", "trust", "-m", "hosted_vllm/fake", "--api-base", server.base,
                               *TINY, "--db", db)
    assert code == 3 and "resume" in err
    with Store(db) as store:
        [stopped] = store.runs.list_runs()
        assert stopped.status == "stopped"
        ep = store.episodes.list(stopped.id)[0]
        store.conn.execute("UPDATE episodes SET history_episode_ids = ? WHERE id = ?",
                           (json.dumps([ep.id]), ep.id))  # a leak written around the guards
        store.conn.execute("UPDATE episodes SET phase = 'eval', mode = 'eval', seed = 1000000, checkpoint = 0 "
                           "WHERE id = ?", (ep.id,))
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 1 and "leak" in out

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(games, "names", interrupted)
    code, _, err = run_cli(capsys, "games")
    assert code == 130  # (the resume hint on Ctrl-C is issue 9's)


@pytest.mark.parametrize("how", ["env", "config"])
def test_run_uses_the_configured_default_model(tmp_path, capsys, monkeypatch, how):
    db = str(tmp_path / "m.db")
    if how == "env":
        monkeypatch.setenv("S3GYM_MODEL", "scripted/trust")
    else:
        config = tmp_path / "config.toml"
        config.write_text('default_model = "scripted/trust"\n', encoding="utf-8")
        monkeypatch.setenv("S3GYM_CONFIG", str(config))
    code, _, err = run_cli(capsys, "run", "trust", *TINY, "--db", db)
    assert code == 0, err
    with Store(db) as store:
        assert [r.config.model for r in store.runs.list_runs()] == ["scripted/trust"]


def test_json_output_of_runs_report_and_models(tmp_path, capsys):
    db = str(tmp_path / "j.db")
    assert run_cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--db", db)[0] == 0
    code, out, _ = run_cli(capsys, "runs", "--json", "--db", db)
    [run] = json.loads(out)
    assert code == 0 and run["config"]["game"] == "trust" and run["status"] == "finished"
    code, out, _ = run_cli(capsys, "report", run["id"], "--json", "--db", db)
    report = json.loads(out)
    assert code == 0 and report["tables"]["curves"]["rows"][0]["run"] == run["id"]
    code, out, _ = run_cli(capsys, "models", "--json")
    models = json.loads(out)
    assert code == 0 and {"model": "scripted/trust"} .items() <= next(m for m in models
                                                                     if m["model"] == "scripted/trust").items()


def test_runs_table_keeps_long_ids_and_numbers_whole_at_80_columns(tmp_path, capsys, monkeypatch):
    db = tmp_path / "w.db"
    from s3gym_tui.models import RunConfig

    with Store(db) as store:
        for i in range(3):
            store.runs.create_run(RunConfig(model="hosted_vllm/Qwen/Qwen2.5-72B-Instruct-AWQ", game="minesweeper",
                                            pathway="summary"), run_id=f"minesweeper-summary-{i}0123456789ab")
    monkeypatch.setattr(console, "width", 80)
    code, out, _ = run_cli(capsys, "runs", "--db", str(db))
    assert code == 0 and "…" not in out and max(map(len, out.splitlines())) <= 80
    for i in range(3):
        assert f"minesweeper-summary-{i}0123456789ab" in out


def test_datasette_metadata_describes_every_table_view_and_column(tmp_path, capsys):
    db = tmp_path / "meta.db"
    assert run_cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--db", str(db))[0] == 0
    out_file = tmp_path / "metadata.json"
    code, out, err = run_cli(capsys, "datasette-metadata", "-o", str(out_file), "--db", str(db))
    assert code == 0, err
    document = json.loads(out_file.read_text(encoding="utf-8"))
    described = document["databases"]["meta"]["tables"]
    with Store(db) as store:
        objects = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        assert objects == set(described)
        for name in objects:
            columns = [r[1] for r in store.conn.execute(f'PRAGMA table_info("{name}")')]
            assert described[name]["description"]
            assert set(described[name]["columns"]) == set(columns), name
            assert all(described[name]["columns"].values())
            # every id reference of a table is a declared foreign key
            fks = {r[3] for r in store.conn.execute(f'PRAGMA foreign_key_list("{name}")')}
            refs = {c for c in columns if c.endswith("_id") or c in ("fork_of",)}
            if name in ("runs", "episodes", "steps", "summaries", "checkpoints", "datasets", "dataset_rows",
                        "leases", "experience_states", "summary_actions", "sweeps", "annotations"):
                assert refs <= fks, (name, refs - fks)
    # Datasette's search box: steps and summaries have their full-text index configured
    assert described["steps"]["fts_table"] == "search_steps" and described["steps"]["fts_pk"] == "id"
    assert described["summary_search"]["fts_table"] == "search_summaries"
    assert described["search_steps_data"]["hidden"] is True
    with Store(db) as store:  # what Datasette runs for ?_search= finds the steps that hold the word
        found = store.conn.execute("SELECT count(*) FROM steps WHERE id IN (SELECT rowid FROM search_steps "
                                   "WHERE search_steps MATCH 'answer')").fetchone()[0]
        assert found > 0


def test_export_writes_the_prompt_as_json(tmp_path, capsys):
    db = str(tmp_path / "e.db")
    assert run_cli(capsys, "run", "trust", "-m", "scripted/trust", "-p", "history", *TINY, "--db", db)[0] == 0
    run_id = json.loads(run_cli(capsys, "runs", "--json", "--db", db)[1])[0]["id"]
    out_file = tmp_path / "run.jsonl"
    assert run_cli(capsys, "export", run_id, "-o", str(out_file), "--db", db)[0] == 0
    steps = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()
             if json.loads(line)["type"] == "step"]
    assert steps and all(isinstance(s["prompt"], list) for s in steps)
    assert all({m["role"] for m in s["prompt"]} == {"system", "user"} for s in steps)
    later = [s for s in steps if "Hint Messages" in s["prompt"][1]["content"]]
    assert later and all("[[text:" not in s["prompt"][1]["content"] for s in later)  # shared parts expanded
