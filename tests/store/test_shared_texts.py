"""Shared prompt parts stored once (texts), joined on read; a v1 file migrates in place."""

import json
import sqlite3

from sqlite_utils import Database

from s3gym_tui.store import Store, schema, stored_prompt


def test_prompt_parts_round_trip(tmp_path):
    store = Store(tmp_path / "s.db")
    hint = 'Hint Messages:\nEnv: "quoted" board\n' * 50
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": hint + "\nnow act"}]
    full = json.dumps(messages, ensure_ascii=False)
    part = json.dumps(hint, ensure_ascii=False)[1:-1]  # as it appears in the prompt
    stored = store.prompts.encode(full, shared=part)
    key = stored_prompt.parse(stored).parts[1]["text"]
    assert store.prompts.put_text(part) == key and store.prompts.get_text(key) == part  # stored once
    assert len(stored) < len(full) / 10
    assert stored_prompt.apply(stored_prompt.parse(stored).parts, None, store.prompts.get_text) == full
    assert store.prompts.encode(full, shared="x" * 600) == store.prompts.encode(full)  # not in the prompt: inline


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
