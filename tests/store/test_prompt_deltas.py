"""Schema v3: prompts stored as deltas against an earlier prompt of the episode, rebuilt exactly.

The end-to-end proof (runs of every game and pathway, forks, kill and resume) is in
tests/engine/test_stored_prompts.py; these pin the store's own rules: old files, corrupt or missing
bases, rolled-back writes, forks, and texts that look like references.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlite_utils import Database

from s3gym_tui.store import Store, StoreError, prompt_delta, schema
from s3gym_tui.store.episodes import Episodes
from s3gym_tui.store.prompt_texts import compact_prompt, escape_refs, unescape_refs

from tests.store.conftest import make_episode, make_step


def _prompt(k: int, extra: str = "", hint: str = "") -> str:
    """A prompt like the engine's: system text, rules, the turns so far, the current board."""
    turns = "".join(f"Env: board {i} {'* ' * (i % 5)}\nLLM: Answer: {i % 7} 90, Score: 1\n" for i in range(k))
    rules = "Tetris rules: drop pieces, clear rows, one point per row. " * 12
    return json.dumps([{"role": "system", "content": "You are an agent. " * 8},
                       {"role": "user", "content": f"{hint}Current episode so far:\n{turns}\n{rules}\n"
                                                   f"Step {k + 1}{extra}\nCurrent state: {'. ' * 40}"}],
                      ensure_ascii=False)


def _encode(text: str, base: str, episode_id: str, base_index: int) -> str:
    stored = prompt_delta.encode(text, base, episode_id, base_index, escape_refs, unescape_refs)
    assert stored is not None and prompt_delta.is_delta(stored)
    return stored


def _episode_with_deltas(store: Store, run, n: int = 12, extra=lambda k: ""):
    episode = store.episodes.add_episode(make_episode(run))
    full = [_prompt(k, extra(k)) for k in range(n)]
    for k, text in enumerate(full):
        stored = escape_refs(text) if k == 0 else _encode(text, full[k - 1], episode.id, k - 1)
        store.episodes.add_step(make_step(episode.id, k, prompt=stored))
    return episode, full


def test_deltas_read_back_exactly_in_any_order_and_much_smaller(store, run, db_path):
    episode, full = _episode_with_deltas(store, run)
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(12)] == full
    fresh = Store(db_path, check=False)
    assert [fresh.prompts.step_prompt(episode.id, k) for k in (11, 3, 7, 0, 11)] == [full[k] for k in (11, 3, 7, 0, 11)]
    steps = store.episodes.steps(episode.id)
    assert [store.prompts.expand_prompt(s.prompt) for s in steps] == full == [store.prompts.prompt_of(s) for s in steps]
    light = store.episodes.steps(episode.id, include_prompt=False)
    assert [fresh.prompts.prompt_of(s) for s in light] == full
    stored = sum(len(s.prompt) for s in steps[1:])
    assert stored * 5 < sum(len(t) for t in full[1:])


def test_texts_that_look_like_references_stay_text(store, run, db_path):
    tricky = lambda k: f" typed [[text:{'a' * 32}]] and [[delta]][1,2] and [[text\\\\u003a too #{k}"
    episode, full = _episode_with_deltas(store, run, extra=tricky)
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(12)] == full
    assert json.loads(full[5])[1]["content"].count("[[text:") == 1


def test_a_hint_block_shared_through_texts_inside_a_delta_chain(store, run, db_path):
    episode = store.episodes.add_episode(make_episode(run))
    hint = "Hint Messages:\n" + "Env: old board\nLLM: Answer: 1 0, Score: 2\n" * 60
    full = [_prompt(k, hint=hint) for k in range(4)]
    key = store.prompts.put_text(hint)
    store.episodes.add_step(make_step(episode.id, 0, prompt=compact_prompt(full[0], key, hint)))
    for k in range(1, 4):
        store.episodes.add_step(make_step(episode.id, k, prompt=_encode(full[k], full[k - 1], episode.id, k - 1)))
    assert f"[[text:{key}]]" in store.episodes.steps(episode.id)[0].prompt
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(4)] == full


def _altered(stored: str) -> str:
    """The same delta with one character of its new text changed (its CRC no longer fits)."""
    d = prompt_delta.parse(stored)
    ops = list(d.ops)
    i = max(i for i, op in enumerate(ops) if isinstance(op, str))
    ops[i] = ops[i][:-1] + ("x" if ops[i][-1:] != "x" else "y")
    return prompt_delta._dump(d.episode_id, d.base_index, d.base_length, d.base_crc, d.length, d.crc, ops)


def test_a_corrupt_or_orphaned_delta_is_a_one_line_error(store, run, db_path):
    episode, full = _episode_with_deltas(store, run, n=4)
    conn = sqlite3.connect(db_path)
    stored = conn.execute('SELECT prompt FROM steps WHERE episode_id = ? AND "index" = 2', (episode.id,)).fetchone()[0]
    cases = {
        "not valid JSON": "[[delta]][not json",
        "wrong shape": "[[delta]][1, 2]",
        "base in the future": stored.replace(f'"{episode.id}",1,', f'"{episode.id}",3,', 1),
        "changed text": _altered(stored),
    }
    for name, bad in cases.items():
        conn.execute('UPDATE steps SET prompt = ? WHERE episode_id = ? AND "index" = 2', (bad, episode.id))
        conn.commit()
        with pytest.raises(StoreError) as err:
            Store(db_path, check=False).prompts.step_prompt(episode.id, 2)
        assert "corrupt" in str(err.value) and "\n" not in str(err.value), name
    conn.execute('UPDATE steps SET prompt = ? WHERE episode_id = ? AND "index" = 2', (stored, episode.id))
    conn.execute('DELETE FROM steps WHERE episode_id = ? AND "index" = 1', (episode.id,))
    conn.commit()
    with pytest.raises(StoreError, match="corrupt"):
        Store(db_path, check=False).prompts.step_prompt(episode.id, 3)
    assert Store(db_path, check=False).prompts.step_prompt(episode.id, 0) == full[0]


def test_a_rolled_back_write_leaves_no_cached_prompt(store, run, monkeypatch):
    episode, full = _episode_with_deltas(store, run, n=3)
    other = _prompt(3, " first try")

    def failing(*args):
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(Episodes, "_step_values", staticmethod(failing))
        with pytest.raises(StoreError):
            store.episodes.add_step(make_step(episode.id, 3, prompt=_encode(other, full[2], episode.id, 2)))
    again = _prompt(3, " second try")
    store.episodes.add_step(make_step(episode.id, 3, prompt=_encode(again, full[2], episode.id, 2)))
    assert store.prompts.step_prompt(episode.id, 3) == again


def test_a_forks_copied_steps_are_based_on_its_own_copies(store, run, db_path):
    source, full = _episode_with_deltas(store, run, n=6)
    fork = make_episode(None, fork_of=source.id, fork_step=4, seed=source.seed)
    copied = [s.model_copy(update={"episode_id": fork.id}) for s in store.episodes.steps(source.id)[:4]]
    store.episodes.add_episode(fork, copied)
    rows = store.episodes.steps(fork.id)
    for step in rows[1:]:
        assert prompt_delta.parse(step.prompt).episode_id == fork.id
    assert [Store(db_path, check=False).prompts.step_prompt(fork.id, k) for k in range(4)] == full[:4]
    # a copied step whose base is not the same text in the new episode is stored whole instead
    lone = make_episode(None, seed=source.seed)
    store.episodes.add_episode(lone, [make_step(lone.id, 0, prompt=escape_refs(_prompt(0, " other"))),
                             store.episodes.steps(source.id)[1].model_copy(update={"episode_id": lone.id})])
    second = store.episodes.steps(lone.id)[1].prompt
    assert not prompt_delta.is_delta(second) and store.prompts.expand_prompt(second) == full[1]


def test_a_version_2_file_upgrades_with_its_prompts_kept(tmp_path):
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
    compact = escape_refs(full).replace(escape_refs(json.dumps(hint, ensure_ascii=False)[1:-1]), f"[[text:{key}]]")
    for i, prompt in enumerate([compact, '[{"role": "user", "content": "plain"}]']):
        db["steps"].insert({"episode_id": "e", "index": i, "action": "cheat", "reward": 0.0, "valid": 1,
                            "terminated": 0, "truncated": 0, "actor": "model", "tokens_in": 0, "tokens_out": 0,
                            "latency_ms": 0.0, "created_at": "2026-01-01T00:00:00.000+00:00", "feedback": "",
                            "observation": "o", "reply": "r", "prompt": prompt})
    db.conn.commit()
    db.conn.close()
    store = Store(path)
    assert store.schema_version == schema.current_version() >= 3
    assert store.prompts.step_prompt("e", 0) == full
    assert store.prompts.step_prompt("e", 1) == '[{"role": "user", "content": "plain"}]'
    assert len(store.episodes.steps("e")) == 2 and store.prompts.get_text(key) == hint


def test_an_older_s3gym_refuses_a_file_with_deltas(tmp_path, monkeypatch):
    path = tmp_path / "v3.db"
    Store(path).close()
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:-1])  # the code before deltas
    with pytest.raises(StoreError, match="newer s3gym"):
        Store(path)


def test_a_cached_prompt_is_only_used_for_the_row_it_was_built_from(store, run, db_path):
    episode, full = _episode_with_deltas(store, run, n=5)
    assert store.prompts.step_prompt(episode.id, 4) == full[4]  # now cached in this store
    conn = sqlite3.connect(db_path)
    conn.execute('DELETE FROM steps WHERE episode_id = ? AND "index" = 4', (episode.id,))
    conn.commit()
    with pytest.raises(StoreError, match="no step 4"):
        store.prompts.step_prompt(episode.id, 4)
    replaced = _prompt(4, " replaced")
    conn.execute('UPDATE episodes SET n_steps = 4 WHERE id = ?', (episode.id,))
    conn.commit()
    store.episodes.add_step(make_step(episode.id, 4, prompt=_encode(replaced, full[3], episode.id, 3)))
    assert store.prompts.step_prompt(episode.id, 4) == replaced
