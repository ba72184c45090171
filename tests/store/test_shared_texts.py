"""Schema v2: shared prompt parts stored once, expanded on read; a v1 file migrates in place."""

import json
import sqlite3

from sqlite_utils import Database

from s3gym_tui.store import Store, schema
from s3gym_tui.store.prompt_texts import compact_prompt


def test_prompt_parts_round_trip(tmp_path):
    store = Store(tmp_path / "s.db")
    hint = 'Hint Messages:\nEnv: "quoted" board\n' * 50
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": hint + "\nnow act"}]
    full = json.dumps(messages, ensure_ascii=False)
    key = store.prompts.put_text(hint)
    assert store.prompts.put_text(hint) == key  # stored once
    compact = compact_prompt(full, key, hint)
    assert len(compact) < len(full) / 10 and f"[[text:{key}]]" in compact
    assert store.prompts.expand_prompt(compact) == full
    assert json.loads(store.prompts.expand_prompt(compact)) == messages
    assert store.prompts.expand_prompt("[[text:" + "0" * 32 + "]]") == "[[text:" + "0" * 32 + "]]"  # unknown key kept


def test_version_1_file_migrates_to_current(tmp_path):
    path = tmp_path / "v1.db"
    db = Database(sqlite3.connect(path))
    schema.MIGRATIONS[0](db)
    db["meta"].insert({"key": schema.VERSION_KEY, "value": "1"})
    db.conn.commit()
    db.conn.close()
    store = Store(path)
    assert store.schema_version == schema.current_version() >= 2
    assert store.prompts.put_text("x") and store.prompts.get_text(store.prompts.put_text("x")) == "x"
