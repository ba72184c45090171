"""Bad input: unknown game, model or run id; malformed config files; databases that are corrupt,
newer, read-only, locked or on a full disk; empty or enormous summary edits; forks from steps or
episodes that do not exist. Each gets one clear line (CLI: exit 2, no traceback) and leaves the
stored data intact (checked with a dump or the file's bytes before and after)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.config import ConfigError
from s3gym_tui.engine.play import PlayError, fork_session, new_play_session
from s3gym_tui.engine.runner import call_settings
from s3gym_tui.store import SCHEMA_VERSION, Store, StoreError
from s3gym_tui.store.connection import Connection
from s3gym_tui.store.episodes import Episodes

from tests.engine.helpers import check_run_consistency, run_protocol, trajectory
from tests.reliability.support import dump, file_bytes, one_line

TINY = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, str]:
    """A database with one finished Trust run (Summary pathway)."""
    path = tmp_path_factory.mktemp("bad") / "template.db"
    store, run = run_protocol(path, run_id="done", model="scripted/trust", game="trust", pathway="summary",
                              explore_episodes=2, eval_every=2, eval_episodes=1)
    store.close()
    return path, run.id


@pytest.fixture
def db(template, tmp_path) -> Path:
    target = tmp_path / "copy.db"
    target.write_bytes(template[0].read_bytes())
    return target


# ----------------------------------------------------------------------------- unknown names

@pytest.mark.parametrize("args,needle", [
    (["run", "go"], "unknown game 'go'"),
    (["run", "[/bold]"], "unknown game '[/bold]'"),
    (["run", "trust", "-m", "nosuchprovider/x", *TINY], "does not know the provider"),
    (["run", "trust", "-m", "fault/go", *TINY], "fault/go is not a built-in model"),
    (["run", "trust", "-m", "[/red]broken", *TINY], "does not know the provider"),
    (["run", "trust", "-m", "scripted/chess", *TINY], "scripted/chess plays chess only"),
    (["run", "trust", "-m", "hosted_vllm/gpt-4.1", "--api-base", "http://127.0.0.1:9", *TINY], "stopped"),
    (["run", "trust", "-m", "hosted_vllm/gpt-4.1", "--api-base", "::::", *TINY], "is not a server's URL"),
    (["resume", "nosuch"], "no run 'nosuch'"),
    (["report", "nosuch", "done"], "no run 'nosuch'"),
    (["export", "nosuch"], "no run 'nosuch'"),
    (["run", "trust", "-p", "trained"], "s3gym train"),
])
def test_unknown_names_are_one_line_and_change_nothing(db, capsys, args, needle):
    before = dump(db)
    code, out, err = cli(capsys, *args, "--db", db)
    # 2: refused before anything was stored; 3: the model failed once the run worked (exit codes)
    assert code == (3 if needle == "stopped" else 2)
    if needle == "stopped":  # one line, then the command that continues the run
        err, resume = err.rstrip("\n").rsplit("\n", 1)
        assert resume.startswith("resume with: s3gym resume trust-none-")
    assert needle in one_line(err)
    after = dump(db)
    if args[0] == "run" and needle == "stopped":  # a new run was recorded, stopped; the old one is intact
        assert [line for line in after if "'done'" in line or "done-" in line] == \
            [line for line in before if "'done'" in line or "done-" in line]
    else:
        assert after == before


def test_a_failed_export_does_not_touch_the_output_file(db, tmp_path, capsys):
    out = tmp_path / "precious.jsonl"
    out.write_text("keep me\n")
    code, _, err = cli(capsys, "export", "nosuch", "-o", out, "--db", db)
    assert code == 2 and "no run 'nosuch'" in one_line(err)
    assert out.read_text() == "keep me\n"
    code, _, _ = cli(capsys, "export", "done", "-o", tmp_path / "new.jsonl", "--db", db)
    assert code == 0 and (tmp_path / "new.jsonl").read_text().count("\n") > 10


# ----------------------------------------------------------------------------- config files

BAD_CONFIGS = {
    "syntax": (b'theme = "dark\n', "not valid TOML"),
    "wrong-type": (b"theme = 5\n", "theme"),
    "wrong-choice": (b'theme = "purple"\n', "theme"),
    "unknown-key": (b'colour = "red"\n', "colour"),
    "nested-type": (b"[keymap]\nstep = 5\n", "keymap"),
    "not-utf8": (b'theme = "\xff\xfe"\n', "not valid TOML"),
    "db-type": (b"db = 42\n", "db"),
}


@pytest.mark.parametrize("name", BAD_CONFIGS)
def test_malformed_config_file_is_one_line_for_cli_and_app(tmp_path, monkeypatch, capsys, name):
    content, needle = BAD_CONFIGS[name]
    config = tmp_path / "config.toml"
    config.write_bytes(content)
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    monkeypatch.delenv("S3GYM_DB", raising=False)
    for args in (["runs"], ["run", "trust", "-m", "scripted/trust", *TINY], ["tui"], []):
        code, _, err = cli(capsys, *args)
        line = one_line(err)
        assert code == 2 and str(config) in line and needle in line, (args, line)
    from s3gym_tui.app import S3GymApp

    with pytest.raises(ConfigError) as exc:
        S3GymApp(db_path=tmp_path / "x.db")
    assert "\n" not in str(exc.value) and needle in str(exc.value)
    assert not (tmp_path / "x.db").exists()


def test_config_file_that_is_a_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("S3GYM_CONFIG", str(tmp_path))
    code, _, err = cli(capsys, "runs")
    assert code == 2 and "cannot be read" in one_line(err)


def test_a_good_config_file_names_the_database(tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.toml"
    config.write_text(f'db = "{tmp_path / "from-config.db"}"\ntheme = "light"\n')
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    monkeypatch.delenv("S3GYM_DB", raising=False)
    code, _, err = cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY)
    assert code == 0, err
    assert len(Store(tmp_path / "from-config.db").runs.list_runs()) == 1


# ----------------------------------------------------------------------------- databases

def _smash_pages(path: Path, target: Path) -> None:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[2 * page + 10: 4 * page] = os.urandom(2 * page - 10)
    target.write_bytes(bytes(data))  # a new file: this process has not checked it yet


@pytest.mark.parametrize("args", [["runs"], ["resume", "done"], ["report"], ["audit"], ["export", "done"],
                                  ["run", "trust", "-m", "scripted/trust", *TINY]])
def test_corrupt_database_is_refused_untouched(db, tmp_path, capsys, args):
    bad = tmp_path / f"smashed-{args[0]}.db"
    _smash_pages(db, bad)
    before = file_bytes(bad)
    code, _, err = cli(capsys, *args, "--db", bad)
    assert code == 2 and "corrupt" in one_line(err)
    assert file_bytes(bad) == before


@pytest.mark.parametrize("args", [["runs"], ["resume", "done"], ["run", "trust", "-m", "scripted/trust", *TINY]])
def test_newer_schema_is_refused_untouched(db, capsys, args):
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 3),))
    conn.commit()
    conn.close()
    before = file_bytes(db)
    code, _, err = cli(capsys, *args, "--db", db)
    assert code == 2 and "newer s3gym" in one_line(err) and "upgrade s3gym" in one_line(err)
    assert file_bytes(db) == before


def test_read_only_database_reads_but_refuses_writes_with_one_line(db, capsys):
    before = dump(db)
    db.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        code, out, _ = cli(capsys, "runs", "--db", db)
        assert code == 0 and "done" in out
        code, out, _ = cli(capsys, "report", "done", "--db", db)
        assert code == 0 and "done" in out
        for args in (["run", "trust", "-m", "scripted/trust", *TINY], ["rm", "done", "--yes"]):
            code, _, err = cli(capsys, *args, "--db", db)
            assert code == 2 and "read-only" in one_line(err)
    finally:
        db.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert dump(db) == before


@pytest.fixture
def short_busy_timeout(monkeypatch):
    """Every Store opened waits at most 0.3 s for another writer's lock."""
    original = Connection.__init__

    def init(self, path=None, *, busy_timeout=10.0, **options):
        original(self, path, busy_timeout=0.3, **options)

    monkeypatch.setattr(Connection, "__init__", init)


def test_database_locked_by_another_writer_is_one_line_then_works(db, capsys, short_busy_timeout):
    before = dump(db)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO meta (key, value) VALUES ('blocker', 'uncommitted')")
    try:
        code, out, _ = cli(capsys, "runs", "--db", db)  # readers are not blocked (WAL)
        assert code == 0 and "done" in out
        for args in (["run", "trust", "-m", "scripted/trust", *TINY], ["rm", "done", "--yes"]):
            code, _, err = cli(capsys, *args, "--db", db)
            assert code == 2 and "locked by another writer (waited 0.3 s)" in one_line(err)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert dump(db) == before
    code, _, err = cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--db", db)
    assert code == 0, err


def test_disk_full_mid_run_is_one_line_keeps_what_was_stored_and_resumes(db, tmp_path, capsys, monkeypatch):
    """The file may grow by a few pages only: the run stops with one line and the resume command
    (exit 3: something was stored); everything stored before is consistent; with room again,
    resume finishes the run exactly as it should be."""
    original = Connection._connect
    extra = {"pages": 12}

    def capped(self):
        conn = original(self)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + extra['pages']}")
        return conn

    monkeypatch.setattr(Connection, "_connect", capped)
    before = [line for line in dump(db) if "done" in line]
    code, _, err = cli(capsys, "run", "snake", "-m", "scripted/snake", "-p", "history", *TINY, "--db", db)
    error, resume = [line for line in err.splitlines() if line.strip()]
    assert code == 3 and "disk full" in error and "Traceback" not in err
    monkeypatch.setattr(Connection, "_connect", original)
    store = Store(db)
    assert [line for line in dump(db) if "done" in line] == before  # the other run is untouched
    run = next(r for r in store.runs.list_runs() if r.id != "done")
    assert resume == f"resume with: s3gym resume {run.id}"
    stored = [(e.id, e.n_steps, len(store.episodes.steps(e.id))) for e in store.episodes.list(run.id)]
    assert sum(n for _, n, _ in stored) > 0 and all(n == m for _, n, m in stored)
    code, _, err = cli(capsys, "resume", run.id, "--db", db)
    assert code == 0, err
    reference_store, _ = run_protocol(tmp_path / "ref.db", run_id=run.id, model="scripted/snake", game="snake",
                                      pathway="history", explore_episodes=2, eval_every=2, eval_episodes=1)
    assert trajectory(store, run.id) == trajectory(reference_store, run.id)
    check_run_consistency(store, store.runs.get_run(run.id))


def test_database_path_that_is_a_directory(tmp_path, capsys):
    code, _, err = cli(capsys, "runs", "--db", tmp_path)
    assert code == 2 and "is a directory" in one_line(err)


# ----------------------------------------------------------------------------- summary edits

@pytest.mark.parametrize("retain,avoid,nxt,needle", [
    ("", "", "", "empty edit"),
    ("   ", "\n\t", " ", "empty edit"),
    ("x" * 20_001, "a", "n", "limit is 20,000"),
    ("r", "a", "n" * 1_000_000, "limit is 20,000"),
    ("r \ud800", "a", "n", "not valid Unicode"),
])
def test_bad_summary_edit_is_one_line_and_saves_nothing(db, retain, avoid, nxt, needle):
    store = Store(db)
    summary = store.summaries.list("done")[-1]
    before = dump(db)
    with pytest.raises(StoreError) as err:
        store.summaries.edit_summary(summary.id, retain, avoid, nxt, author="human:tester")
    assert "\n" not in str(err.value) and needle in str(err.value)
    assert dump(db) == before
    edited = store.summaries.edit_summary(summary.id, "r" * 20_000, "", "", author="human:tester")  # at the limit
    assert edited.version == summary.version + 1


# ----------------------------------------------------------------------------- forks

@pytest.mark.parametrize("episode,at_step,needle", [
    ("nosuch", 0, "no episode 'nosuch'"),
    ("done-x000", 99, "cannot fork after step 99"),
    ("done-x000", -1, "cannot fork after step -1"),
    ("done-x000", "3", "cannot fork after step 3"),
    ("done-x000", 2.5, "cannot fork after step 2.5"),
])
def test_fork_from_a_missing_episode_or_step_is_a_play_error(db, episode, at_step, needle):
    store = Store(db)
    run = store.runs.get_run("done")
    before = dump(db)
    with pytest.raises(PlayError) as err:
        fork_session(store, episode, at_step, call_settings(run.config, 0))
    assert "\n" not in str(err.value) and needle in str(err.value)
    assert dump(db) == before


def test_a_fork_that_cannot_be_stored_leaves_nothing_behind(db, monkeypatch):
    store = Store(db)
    run = store.runs.get_run("done")
    before = dump(db)
    original = Episodes.add_steps

    def failing(self, steps, repairs=None):
        original(self, steps, repairs)
        raise StoreError("disk full: cannot add steps")

    monkeypatch.setattr(Episodes, "add_steps", failing)
    with pytest.raises(StoreError):
        fork_session(store, "done-x000", 4, call_settings(run.config, 0))
    assert dump(db) == before  # no fork episode without its steps
    monkeypatch.setattr(Episodes, "add_steps", original)
    session = fork_session(store, "done-x000", 4, call_settings(run.config, 0))
    assert session.episode.n_steps == 4 and len(store.episodes.steps(session.episode.id)) == 4


def test_a_step_that_cannot_be_stored_is_not_taken(db, monkeypatch):
    """The store refuses a step (disk full, lock): the game goes back to the stored state, so the
    next step continues a consistent trajectory."""
    store = Store(db)
    run = store.runs.get_run("done")
    session = new_play_session(store, "trust", "explore", 55, call_settings(run.config, 0))
    session.commit(None, action="collaborate", actor="human")
    original = Episodes.add_step  # a session stores each step through add_step (its prompt encoded there)
    monkeypatch.setattr(Episodes, "add_step", lambda self, step, repair=None, shared=None:
                        (_ for _ in ()).throw(StoreError("disk full")))
    with pytest.raises(StoreError):
        session.commit(None, action="cheat", actor="human")
    monkeypatch.setattr(Episodes, "add_step", original)
    while not session.done:
        session.commit(asyncio.run(session.propose()))
    steps = store.episodes.steps(session.episode.id)
    replayed = games.game_class("trust").replay("explore", 55, [s.action for s in steps])
    assert replayed.score() == store.episodes.get_episode(session.episode.id).score
    assert [s.index for s in steps] == list(range(len(steps)))
