"""The attack campaign's findings, one test each: exports never harm the store and are never torn,
failed checks fail the process, numbers from servers are sanitised, a hung server is bounded by
--timeout, a run that dies of a store error says why, what is stored is bounded, every error is one
line, bad keymaps and doomed configs are refused, secrets never land in the store or exports."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine import llm
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, StoreError

from tests import cli_fork
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-canary-0123456789abcdefXYZ"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
       "OPENAI_API_KEY": KEY}


@pytest.fixture
def server():
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def _scripted_run(path: Path, game: str = "trust", **config) -> str:
    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, explore_episodes=2,
                                              eval_every=1, eval_episodes=1, **config))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        return run.id


def _fake_run(path: Path, server: FakeOpenAI, **config) -> tuple[Store, object]:
    store = Store(path)
    cfg = dict(model="openai/fake", game="trust", api_base=server.base_url, explore_episodes=1,
               eval_every=1, eval_episodes=0, step_cap=3, max_retries=2)
    cfg.update(config)
    run = store.runs.create_run(RunConfig(**cfg))
    return store, asyncio.run(asyncio.wait_for(ProtocolRunner(store, run, backoff_base_s=0.01)
                                               .run_protocol(), 120))


# ----------------------------------------------------------------------------- data loss

@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_export_onto_the_database_or_its_companions_is_refused(tmp_path, capsys, suffix):
    db = tmp_path / "store.db"
    run_id = _scripted_run(db)
    before = db.read_bytes()
    assert main(["export", run_id, "-o", f"{db}{suffix}", "--db", str(db)]) == 2
    assert "is the database" in _one_line_error(capsys)
    assert db.read_bytes() == before
    for companion in ("-wal", "-shm", "-journal"):  # none written by the export
        path = Path(f"{db}{companion}")
        assert not path.exists() or not path.read_bytes().startswith(b'{"type"')
    with Store(db) as store:
        assert store.runs.get_run(run_id)


def test_export_of_a_live_run_is_one_consistent_snapshot(tmp_path):
    db = tmp_path / "live.db"
    Store(db).close()
    # `python -m s3gym_tui run ...`, forked from the preloaded CLI (tests/cli_fork.py)
    proc = cli_fork.spawn(["run", "snake", "-m", "scripted/snake", "--episodes", "40", "--eval-episodes", "1",
                           "--db", str(db)], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exports = 0
    try:
        deadline = time.monotonic() + 120
        while exports < 12 and time.monotonic() < deadline:
            with Store(db, read_only=True) as store:
                runs = store.runs.list_runs()
            if not runs:
                time.sleep(0.1)
                continue
            out = tmp_path / f"export-{exports}.jsonl"
            assert main(["export", runs[0].id, "-o", str(out), "--db", str(db)]) == 0
            lines = [json.loads(line) for line in out.read_text().splitlines()]
            counts: dict[str, int] = {}
            for line in lines:
                if line["type"] == "step":
                    counts[line["episode_id"]] = counts.get(line["episode_id"], 0) + 1
            for line in lines:
                if line["type"] == "episode":
                    assert line["n_steps"] == counts.get(line["id"], 0), line["id"]
            exports += 1
    finally:
        proc.kill()
        proc.wait()
    assert exports >= 3


def test_export_errors_are_one_line_and_write_nothing(tmp_path, capsys, monkeypatch):
    db = tmp_path / "store.db"
    run_id = _scripted_run(db)
    assert main(["export", run_id, "-o", str(tmp_path / "missing" / "x.jsonl"), "--db", str(db)]) == 2
    assert "no directory" in _one_line_error(capsys)
    assert main(["export", run_id, "-o", str(tmp_path), "--db", str(db)]) == 2
    assert "is a directory" in _one_line_error(capsys)
    target = tmp_path / "kept.jsonl"
    target.write_text("an older export\n")
    from s3gym_tui import output

    def full(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "fsync", full)
    assert main(["export", run_id, "-o", str(target), "--db", str(db)]) == 2
    assert "No space left on device" in _one_line_error(capsys)
    assert target.read_text() == "an older export\n"  # the old file is still whole
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


# ----------------------------------------------------------------------------- exit codes

def test_a_failed_audit_fails_the_process(tmp_path, capsys):
    db = tmp_path / "store.db"
    run_id = _scripted_run(db)
    assert main(["audit", "--db", str(db)]) == 0
    conn = sqlite3.connect(db)  # a leak written behind the store's back
    eval_id = conn.execute("SELECT id FROM episodes WHERE phase = 'eval' LIMIT 1").fetchone()[0]
    conn.execute("UPDATE episodes SET history_episode_ids = ? WHERE run_id = ? AND phase = 'explore'",
                 (json.dumps([eval_id]), run_id))
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert main(["audit", "--db", str(db)]) == 1
    assert "leak" in capsys.readouterr().out


# ----------------------------------------------------------------------------- servers

@pytest.mark.parametrize("value", ["nan", "inf", "-5", "1e308", "Wed, 21 Oct 2099 07:28:00 GMT"])
def test_a_crazy_retry_after_never_stalls_a_run(tmp_path, server, key, value, recorded_waits):
    """Each wait before a retry is bounded: a huge Retry-After by the cap (CallSettings.backoff_cap_s),
    one that is not a sane number (nan, inf, negative, a date) by the engine's own backoff. The
    waits are recorded, not slept (the cap is 30 s)."""
    server.behave(times=2, status=429, headers={"Retry-After": value})
    store, final = _fake_run(tmp_path / "r.db", server)
    assert final.status == "finished"
    steps = store.episodes.steps(store.episodes.list(final.id)[0].id)
    assert "rate_limit" in (steps[0].fault or "")
    retry_waits = [w for w in recorded_waits if w > 0]  # sleep(0): a yield to the loop, not a wait
    cap = llm.CallSettings("openai/fake").backoff_cap_s
    if value == "1e308":
        assert retry_waits == [cap, cap]
    else:  # the backoff of _fake_run (base 0.01 s, full jitter) for both retries
        assert len(retry_waits) <= 2 and all(w <= 0.02 for w in retry_waits), retry_waits
    store.close()


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 10**30, "completion_tokens": 5},
    {"prompt_tokens": -7, "completion_tokens": -1},
    {"prompt_tokens": 5e15, "completion_tokens": 10**12},
])
def test_impossible_token_counts_are_stored_as_zero_with_a_fault(tmp_path, server, key, usage):
    server.default["raw_body"] = json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Answer: C, Score: 1"}}],
        "usage": usage})
    store, final = _fake_run(tmp_path / "t.db", server)
    assert final.status == "finished"
    for step in store.episodes.steps(store.episodes.list(final.id)[0].id):
        assert 0 <= step.tokens_in <= 10_000_000 and 0 <= step.tokens_out <= 10_000_000
    first = store.episodes.steps(store.episodes.list(final.id)[0].id)[0]
    assert "prompt_tokens" in (first.fault or "") and "stored as 0" in first.fault
    store.close()


def test_timeout_and_retries_bound_a_hung_server(tmp_path, server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.behave(hang=True)
    db = tmp_path / "hung.db"
    started = time.monotonic()
    code = main(["run", "trust", "-m", "openai/fake", "--api-base", server.base_url, "--episodes", "1",
                 "--eval-episodes", "0", "--timeout", "0.5", "--max-retries", "1", "--db", str(db)])
    elapsed = time.monotonic() - started
    assert code != 0
    err = capsys.readouterr().err
    assert "after 2 attempts" in err
    with Store(db) as store:
        run = store.runs.list_runs()[0]
        assert run.status == "stopped" and "after 2 attempts" in run.status_reason
    assert elapsed < 120  # a guard against a stall, not a speed claim: 2 x 0.5 s plus backoff


def test_a_run_killed_by_a_store_error_says_why(tmp_path):
    db = tmp_path / "full.db"
    store = Store(db)
    run = store.runs.create_run(RunConfig(model="scripted/snake", game="snake", explore_episodes=50,
                                          eval_episodes=0, pathway="history"))
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages + 8}")
    with pytest.raises(StoreError, match="disk full"):
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    store.conn.execute("PRAGMA max_page_count = 1073741823")
    stopped = store.runs.get_run(run.id)  # resumable: what was stored is whole
    assert stopped.status == "stopped" and stopped.status_reason.startswith("store: disk full")
    assert store.leases.lease(run.id) is None
    store.close()


# ----------------------------------------------------------------------------- bounded storage

def test_huge_actions_and_replies_are_cut_with_a_fault_and_the_verifier_stays_exact(tmp_path, server,
                                                                                  key):
    import s3gym_games as games

    huge_action = "C" * 1_100_000
    server.behave(times=1, reply=f"Answer: {huge_action}, Score: 1")
    server.behave(times=1, reply="x" * 20_000_000 + "\nAnswer: C, Score: 1")
    store, final = _fake_run(tmp_path / "big.db", server, step_cap=4)
    episode = store.episodes.list(final.id)[0]
    steps = store.episodes.steps(episode.id)
    assert len(steps[0].action) == 2_000 and "action cut to 2,000" in steps[0].fault
    assert len(steps[1].reply) < 110_000 and "reply cut to 100,000" in steps[1].fault
    for step in steps:
        assert len(store.prompts.step_prompt(episode.id, step.index)) < 50_000
    assert games.verify_trajectory(episode.game, episode.mode, episode.seed,
                                   [s.action for s in steps]) == episode.score
    assert db_size(tmp_path / "big.db") < 5_000_000
    store.close()


def db_size(path: Path) -> int:
    return sum(os.stat(f"{path}{s}").st_size for s in ("", "-wal") if os.path.exists(f"{path}{s}"))


# ----------------------------------------------------------------------------- one-line errors

def test_every_reported_traceback_is_now_one_line(tmp_path, capsys, monkeypatch):
    db = tmp_path / "s.db"
    run_id = _scripted_run(db)
    cases = [
        ["runs", "--limit", "100000000000000000000000", "--db", str(db)],
        ["play", "trust", "--delay", "-1"],
        ["play", "trust", "--seed", "1000005"],
        ["play", "trust", "--mode", "eval", "--seed", "5"],
        ["run", "trust", "-m", "nosuch/model", "--db", str(db)],
        ["run", "trust", "-m", "scripted/chess", "--db", str(db)],
        ["run", "trust", "-m", "anthropic/claude-sonnet-4-5", "--db", str(db)],
    ]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for args in cases:
        assert main(args) == 2, args
        _one_line_error(capsys)
    with Store(db) as store:
        assert [r.id for r in store.runs.list_runs()] == [run_id]  # the doomed runs stored nothing
    config = tmp_path / "nul.toml"
    config.write_text('db = "/tmp/a\\u0000b.db"\n')
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    assert main(["runs"]) == 2
    assert "not a usable database path" in _one_line_error(capsys)
    monkeypatch.setenv("S3GYM_CONFIG", "/nonexistent/s3gym.toml")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET config = '{oops' WHERE id = ?", (run_id,))
    conn.execute("UPDATE episodes SET history_episode_ids = 'oops'")
    conn.commit()
    conn.close()
    for args in (["resume", run_id], ["export", run_id, "-o", str(tmp_path / "e.jsonl")],
                 ["report", run_id]):
        assert main([*args, "--db", str(db)]) == 2, args
        assert "is not valid JSON" in _one_line_error(capsys)
    assert main(["runs", "--db", str(db)]) == 0  # the listing goes on, the damaged run is named
    assert "warning:" in _one_line_error(capsys)


def test_a_second_resume_of_a_live_run_is_refused_in_one_line(tmp_path, capsys):
    db = tmp_path / "busy.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        lease = store.leases.acquire_lease(run.id, "s3gym run")
        assert main(["resume", run.id, "--db", str(db)]) == 2
        assert "is being driven by PID" in _one_line_error(capsys)
        store.leases.release_lease(lease)


# ----------------------------------------------------------------------------- bad input

def test_doomed_configs_are_refused_at_creation(tmp_path):
    from pydantic import ValidationError

    from s3gym_tui.models import explore_episode_id

    with pytest.raises(ValidationError, match="reaches seed 1000027"):
        RunConfig(model="scripted/trust", game="trust", explore_seed_base=999_998)
    with Store(tmp_path / "d.db") as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        from s3gym_tui.store import LeakageError

        with pytest.raises(LeakageError):
            store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=f"{run.id}-c003-e0")
        # for_episode_id is a declared foreign key: the exploration episode is stored with its summary
        with pytest.raises(StoreError, match="store the episode a summary is written for first"):
            store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=explore_episode_id(run.id, 3))
        from s3gym_tui.models import Episode

        episode = Episode(id=explore_episode_id(run.id, 3), run_id=run.id, game="trust", mode="explore",
                          phase="explore", seed=3, index=3, model=run.config.model, pathway=run.config.pathway)
        _, summary = store.episodes.add_episode_with_summary(episode, "r", "a", "n")
        assert summary.for_episode_id == episode.id


@pytest.mark.parametrize("line, problem", [
    ('quit = "ctrl+ctrl+"', "ends in '+'"),
    ('help = "ctrl+q"', "ctrl+q is the quit key"),
    ('quit = "hyperctrl+q"', "is not a modifier"),
    ('nosuch_binding = "x"', "no binding has this id"),
    ('step = "not-a-key-name"', "is not a key name"),
])
def test_bad_keymaps_are_refused_naming_the_line(tmp_path, capsys, monkeypatch, line, problem):
    config = tmp_path / "c.toml"
    config.write_text(f'theme = "dark"\n\n[keymap]\n{line}\n')
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    assert main(["tui", "--db", str(tmp_path / "k.db")]) == 2
    err = _one_line_error(capsys)
    assert f"{config} line 4: keymap." in err and problem in err


# ----------------------------------------------------------------------------- read-only media

def test_a_wal_database_on_read_only_media_can_still_be_read(tmp_path, capsys):
    media = tmp_path / "media"
    media.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(media)],
                      capture_output=True).returncode != 0:
        pytest.skip("this machine cannot mount a file system (needed to make one read-only)")
    try:
        db = media / "ro.db"
        run_id = _scripted_run(db)
        assert not Path(f"{db}-wal").exists()
        assert subprocess.run(["mount", "-o", "remount,ro", str(media)]).returncode == 0
        with Store(db) as store:
            assert store.read_only and store.runs.get_run(run_id).status == "finished"
        assert main(["report", run_id, "--db", str(db)]) == 0
        assert main(["export", run_id, "-o", str(tmp_path / "ro.jsonl"), "--db", str(db)]) == 0
    finally:  # the in-process CLI calls above may still hold the file open: collect, then lazily
        gc.collect()
        if subprocess.run(["umount", str(media)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(media)], capture_output=True)


# ----------------------------------------------------------------------------- secrets

def test_a_provider_echoing_the_key_never_lands_it_anywhere(tmp_path, server, key, capsys):
    server.default["reply"] = lambda request: (f"Your key is {KEY}. Retain: use {KEY}\n"
                                               f"Answer: C, Score: 1")
    db = tmp_path / "s.db"
    base = server.base_url + f"?api-key={KEY}"
    store = Store(db)
    with_user = store.runs.create_run(RunConfig(model="openai/fake", game="trust",
                                                api_base=server.base_url.replace("http://", f"http://u:{KEY}@")))
    assert store.runs.get_run(with_user.id).config.api_base == server.base_url  # user:password gone
    store.hygiene.remove_runs([with_user.id])
    run = store.runs.create_run(RunConfig(model="openai/fake", game="trust", api_base=base,
                                          pathway="summary", explore_episodes=2, eval_every=1,
                                          eval_episodes=1, step_cap=3))
    final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    assert final.status == "finished"
    stored = store.runs.get_run(run.id).config.api_base
    assert KEY not in stored and "api-key=[redacted]" in stored
    assert main(["export", run.id, "-o", str(tmp_path / "x.jsonl"), "--db", str(db)]) == 0
    store.close()
    for path in [tmp_path / "x.jsonl", *[Path(f"{db}{s}") for s in ("", "-wal", "-shm")]]:
        if path.exists():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in capsys.readouterr().out
    sent_later = [json.dumps(r["body"]["messages"]) for r in server.requests[2:]]
    assert all(KEY not in text for text in sent_later)  # never sent back to the provider either
