"""Schema 16 upgrade: a file of the old prompt layout (made by the s3gym of schema 15, see
fixtures/make_schema15_prompts.py) keeps every prompt, character for character, read by the store and
by the SQL view; its backup restores; an upgrade killed half-way leaves the file as it was."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlite_utils import Database

from s3gym_tui.store import Store, StoreError, schema

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def _old_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    path.write_bytes(gzip.decompress((FIXTURES / "schema15_prompts.db.gz").read_bytes()))
    return path


def _expected() -> dict[str, str]:
    return json.loads((FIXTURES / "schema15_prompts.json").read_text())


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rows(path: Path) -> dict[str, list]:
    """What the upgrade rewrites, as stored: every step's prompt and the shared texts."""
    conn = sqlite3.connect(path)
    try:
        return {"steps": conn.execute('SELECT id, episode_id, "index", prompt FROM steps ORDER BY id').fetchall(),
                "texts": conn.execute("SELECT key, text FROM texts ORDER BY key").fetchall(),
                "version": [schema.stored_version(conn)]}
    finally:
        conn.close()


def _prompts(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """SHA-256 of every step's prompt as the store reads it, and as the view step_prompts shows it."""
    with Store(path, check=False) as store:
        read = {f"{e.id}/{s.index}": _sha(store.prompts.step_prompt(e.id, s.index))
                for e in store.episodes.list() for s in store.episodes.steps(e.id, include_prompt=False)}
        in_sql = {f"{e}/{i}": _sha(p) for e, i, p in
                  store.conn.execute("SELECT episode_id, step_index, prompt FROM step_prompts")}
    return read, in_sql


def test_the_fixture_is_of_the_old_layout(tmp_path):
    rows = _rows(_old_file(tmp_path))
    assert rows["version"] == [15]
    prompts = [p for *_, p in rows["steps"]]
    assert sum(p.startswith("[[delta]]") for p in prompts) > 200 and sum("[[text:" in p for p in prompts) >= 3
    assert "" in prompts  # a person's move
    assert len(prompts) == len(_expected())


def test_an_old_layout_file_keeps_every_prompt_and_its_backup_restores(tmp_path, capsys):
    path = _old_file(tmp_path)
    before = _rows(path)
    with pytest.raises(StoreError, match="s3gym migrate"):  # refused, one line, until it is upgraded
        Store(path, migrate=False)
    assert _rows(path) == before
    with Store(path) as store:
        assert store.schema_version == schema.current_version() == 16
    assert "upgrading" in capsys.readouterr().err
    expected = _expected()
    read, in_sql = _prompts(path)
    assert read == expected
    blank = [k for k, v in expected.items() if v == _sha("")]
    assert blank and in_sql == {k: v for k, v in expected.items() if k not in blank}  # the view: steps with a prompt
    after = _rows(path)
    assert all(p == "" or p.startswith('{"base":') for *_, p in after["steps"])
    assert [r[:3] for r in after["steps"]] == [r[:3] for r in before["steps"]]
    assert sum(len(p) for *_, p in after["steps"]) < sum(len(p) for *_, p in before["steps"])
    backup = path.with_name(path.name + ".schema15.bak")
    assert _rows(backup) == before  # the backup is the old file, every row as it was
    restored = tmp_path / "restored.db"
    restored.write_bytes(backup.read_bytes())
    Store(restored).close()  # the restored copy upgrades again to the same prompts
    assert _prompts(restored)[0] == expected


_KILLABLE = """
import sys, time
from pathlib import Path
from s3gym_tui.store import migrate_prompts, Store
real = migrate_prompts.prompt_parts_v16
def stalled(conn, progress=None):
    seen = []
    def after(episode_id):
        seen.append(episode_id)
        if len(seen) == 5:  # five episodes rewritten inside the upgrade's transaction: now stop here
            Path(sys.argv[2]).write_text("half-way")
            time.sleep(600)
    real(conn, after)
migrate_prompts.prompt_parts_v16 = stalled
Store(Path(sys.argv[1]))
"""


def test_a_killed_upgrade_leaves_the_file_intact(tmp_path):
    path, marker = _old_file(tmp_path), tmp_path / "half-way"
    before = _rows(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, str(path), str(marker)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no progress"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert _rows(path) == before  # schema 15, every prompt and text as it was
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
    Store(path).close()  # the next upgrade completes (it keeps the killed one's backup)
    assert _prompts(path)[0] == _expected()
    assert len(list(tmp_path.glob("old.db.schema15*.bak"))) == 1


def test_a_version_2_file_upgrades_with_its_prompts_kept(tmp_path):
    """The oldest layout: a shared part referenced as [[text:key]], a typed "[[text:" escaped."""
    path = tmp_path / "v2.db"
    db = Database(sqlite3.connect(path))
    schema.MIGRATIONS[0](db)
    schema.MIGRATIONS[1](db)
    db["meta"].insert({"key": schema.VERSION_KEY, "value": "2"})
    hint = "Hint Messages:\n" + "Env: a board\n" * 80
    full = json.dumps([{"role": "user", "content": hint + "now act [[text: typed"}], ensure_ascii=False)
    key = "0123456789abcdef0123456789abcdef"
    db["texts"].insert({"key": key, "text": hint})
    db["runs"].insert({"id": "r", "config": json.dumps({"model": "scripted/trust", "game": "trust"}),
                       "game": "trust", "model": "scripted/trust", "pathway": "history", "status": "finished",
                       "created_at": "2026-01-01T00:00:00.000+00:00", "note": ""})
    db["episodes"].insert({"id": "e", "run_id": "r", "game": "trust", "mode": "explore", "phase": "explore",
                           "seed": 1, "index": 0, "model": "scripted/trust", "pathway": "history",
                           "status": "finished", "n_steps": 2, "history_episode_ids": "[]", "history_cut": 0,
                           "started_at": "2026-01-01T00:00:00.000+00:00"})
    compact = full.replace("[[text:", "[[text\\u003a").replace(json.dumps(hint)[1:-1], f"[[text:{key}]]")
    assert f"[[text:{key}]]" in compact
    for i, prompt in enumerate([compact, '[{"role": "user", "content": "plain"}]']):
        db["steps"].insert({"episode_id": "e", "index": i, "action": "cheat", "reward": 0.0, "valid": 1,
                            "terminated": 0, "truncated": 0, "actor": "model", "tokens_in": 0, "tokens_out": 0,
                            "latency_ms": 0.0, "created_at": "2026-01-01T00:00:00.000+00:00", "feedback": "",
                            "observation": "o", "reply": "r", "prompt": prompt})
    db.conn.commit()
    db.conn.close()
    store = Store(path)
    assert store.schema_version == schema.current_version()
    assert store.prompts.step_prompt("e", 0) == full
    assert store.prompts.step_prompt("e", 1) == '[{"role": "user", "content": "plain"}]'
    part = json.dumps(hint)[1:-1]
    assert '{"text":' in store.episodes.steps("e")[0].prompt and part in dict(store.conn.execute(
        "SELECT key, text FROM texts")).values()  # still shared, now as it appears in the prompt
    assert [p for (p,) in store.conn.execute("SELECT prompt FROM step_prompts ORDER BY step_index")] == \
        [full, '[{"role": "user", "content": "plain"}]']


def test_a_delta_based_on_another_episodes_step_is_rebuilt(tmp_path):
    """Before schema 5 a fork's copied steps kept deltas against its source's steps: the upgrade
    rebuilds them (the source rewritten first) and stores them against the copy's own steps."""
    path = _old_file(tmp_path)
    conn = sqlite3.connect(path)
    source = "snake-history-x000"
    rows = conn.execute('SELECT * FROM steps WHERE episode_id = ? AND "index" < 4 ORDER BY "index"', (source,)).fetchall()
    assert [p.startswith("[[delta]]") for (p,) in conn.execute(
        'SELECT prompt FROM steps WHERE episode_id = ? AND "index" < 4 ORDER BY "index"', (source,))] == \
        [False, True, True, True]
    columns = [c[1] for c in conn.execute("PRAGMA table_info(steps)")]
    episode = [list(r) for r in conn.execute("SELECT * FROM episodes WHERE id = ?", (source,))][0]
    ep_columns = [c[1] for c in conn.execute("PRAGMA table_info(episodes)")]
    episode[ep_columns.index("id")], episode[ep_columns.index("run_id")] = "zz-old-fork", None
    episode[ep_columns.index("fork_of")], episode[ep_columns.index("fork_step")] = source, 4
    conn.execute(f"INSERT INTO episodes VALUES ({','.join('?' * len(episode))})", episode)
    for row in rows:
        row = list(row)
        row[columns.index("id")], row[columns.index("episode_id")] = None, "zz-old-fork"
        conn.execute(f"INSERT INTO steps VALUES ({','.join('?' * len(row))})", row)
    conn.commit()
    conn.close()
    Store(path).close()
    read, in_sql = _prompts(path)
    expected = _expected()
    for k in range(4):
        assert read[f"zz-old-fork/{k}"] == in_sql[f"zz-old-fork/{k}"] == expected[f"{source}/{k}"]
    assert {k: v for k, v in read.items() if not k.startswith("zz-")} == expected
