"""Schema 16: prompts stored as parts (copies of an earlier prompt of the episode, new text, shared
parts), rebuilt exactly by the store and by the SQL view step_prompts.

The end-to-end proof (runs of every game and pathway, forks, kill and resume) is in
tests/engine/test_stored_prompts.py; these pin the store's own rules: corrupt or missing bases,
rolled-back writes, forks, batches of prompts as sent, and texts that look like parts.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from s3gym_tui.store import Store, StoreError, schema, stored_prompt
from s3gym_tui.store.episodes import Episodes

from tests.store.conftest import make_episode, make_step


def _prompt(k: int, extra: str = "", hint: str = "") -> str:
    """A prompt like the engine's: system text, rules, the turns so far, the current board."""
    turns = "".join(f"Env: board {i} {'* ' * (i % 5)}\nLLM: Answer: {i % 7} 90, Score: 1\n" for i in range(k))
    rules = "Tetris rules: drop pieces, clear rows, one point per row. " * 12
    return json.dumps([{"role": "system", "content": "You are an agent. " * 8},
                       {"role": "user", "content": f"{hint}Current episode so far:\n{turns}\n{rules}\n"
                                                   f"Step {k + 1}{extra}\nCurrent state: {'. ' * 40}"}],
                      ensure_ascii=False)


def _in_sql(db_path, episode_id: str) -> list[str]:
    conn = sqlite3.connect(db_path)
    try:
        return [p for (p,) in conn.execute("SELECT prompt FROM step_prompts WHERE episode_id = ? "
                                           "ORDER BY step_index", (episode_id,))]
    finally:
        conn.close()


def _episode(store: Store, run, n: int = 12, extra=lambda k: "", one_by_one: bool = True):
    episode = store.episodes.add_episode(make_episode(run))
    full = [_prompt(k, extra(k)) for k in range(n)]
    steps = [make_step(episode.id, k, prompt=text) for k, text in enumerate(full)]
    if one_by_one:
        for step in steps:
            store.episodes.add_step(step)
    else:
        store.episodes.add_steps(steps)
    return episode, full


@pytest.mark.parametrize("one_by_one", [True, False], ids=["add_step", "add_steps batch"])
def test_prompts_read_back_exactly_in_any_order_and_much_smaller(store, run, db_path, one_by_one):
    episode, full = _episode(store, run, n=20, one_by_one=one_by_one)
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(20)] == full
    fresh = Store(db_path, check=False)
    assert [fresh.prompts.step_prompt(episode.id, k) for k in (19, 3, 7, 0, 19, 16)] == [full[k] for k in (19, 3, 7, 0, 19, 16)]
    steps = store.episodes.steps(episode.id)
    assert [store.prompts.prompt_of(s) for s in steps] == full
    light = store.episodes.steps(episode.id, include_prompt=False)
    assert [fresh.prompts.prompt_of(s) for s in light] == full
    assert _in_sql(db_path, episode.id) == full
    bases = [json.loads(s.prompt)["base"] for s in steps]
    assert bases[0] is None and bases[16] == 8 and bases[17] == 16  # every 8th step is based 8 back
    stored = sum(len(s.prompt) for s in steps[1:])
    assert stored * 5 < sum(len(t) for t in full[1:])


def test_texts_that_look_like_parts_stay_text(store, run, db_path):
    tricky = lambda k: f' typed [[text:{"a" * 32}]] and {{"text": "{"b" * 32}"}} and {{"base":1,"parts":[[0,9]]}} #{k}'
    episode, full = _episode(store, run, extra=tricky)
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(12)] == full
    assert _in_sql(db_path, episode.id) == full


def test_a_hint_block_shared_through_texts(store, run, db_path):
    hint = json.dumps("Hint Messages:\n" + "Env: old board\nLLM: Answer: 1 0, Score: 2\n" * 60)[1:-1]
    full = [_prompt(k, hint=json.loads(f'"{hint}"')) for k in range(4)]
    episodes = []
    for _ in range(2):  # two episodes that see the same block share one copy of it
        episode = store.episodes.add_episode(make_episode(run))
        for k in range(4):
            store.episodes.add_step(make_step(episode.id, k, prompt=full[k]), shared=hint)
        episodes.append(episode)
    key = stored_prompt.parse(store.episodes.steps(episodes[0].id)[0].prompt).parts[1]["text"]
    assert store.prompts.get_text(key) == hint
    assert sqlite3.connect(db_path).execute("SELECT count(*) FROM texts").fetchone()[0] == 1
    for episode in episodes:
        assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(4)] == full
        assert _in_sql(db_path, episode.id) == full


def _altered(stored: str) -> str:
    """The same stored prompt with one character of its new text changed (its CRC no longer fits)."""
    data = json.loads(stored)
    i = max(i for i, part in enumerate(data["parts"]) if isinstance(part, str))
    data["parts"][i] = data["parts"][i][:-1] + ("x" if data["parts"][i][-1:] != "x" else "y")
    return json.dumps(data)


def test_a_corrupt_or_orphaned_prompt_is_a_one_line_error(store, run, db_path):
    episode, full = _episode(store, run, n=4)
    conn = sqlite3.connect(db_path)
    stored = conn.execute('SELECT prompt FROM steps WHERE episode_id = ? AND "index" = 2', (episode.id,)).fetchone()[0]
    cases = {
        "not valid JSON": '{"base":1, not json',
        "wrong shape": '{"base":1}',
        "base in the future": stored.replace('"base":1,', '"base":3,', 1),
        "copy outside its base": stored.replace('"parts":[[0,', '"parts":[[99999,', 1),
        "unknown shared part": stored.replace('"parts":[', '"parts":[{"text":"' + "0" * 32 + '"},', 1),
        "changed text": _altered(stored),
    }
    for name, bad in cases.items():
        assert bad != stored, name
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
    episode, full = _episode(store, run, n=3)
    other = _prompt(3, " first try")

    def failing(*args):
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(Episodes, "_step_values", staticmethod(failing))
        with pytest.raises(StoreError):
            store.episodes.add_step(make_step(episode.id, 3, prompt=other))
    again = _prompt(3, " second try")
    store.episodes.add_step(make_step(episode.id, 3, prompt=again))
    assert store.prompts.step_prompt(episode.id, 3) == again


def test_a_forks_copied_steps_are_based_on_its_own_copies(store, run, db_path):
    source, full = _episode(store, run, n=6)
    fork = make_episode(None, fork_of=source.id, fork_step=4, seed=source.seed)
    copied = [s.model_copy(update={"episode_id": fork.id, "prompt": store.prompts.prompt_of(s)})
              for s in store.episodes.steps(source.id)[:4]]
    store.episodes.add_episode(fork, copied)
    rows = store.episodes.steps(fork.id)
    assert [json.loads(s.prompt)["base"] for s in rows] == [None, 0, 1, 2]
    assert [Store(db_path, check=False).prompts.step_prompt(fork.id, k) for k in range(4)] == full[:4]
    assert _in_sql(db_path, fork.id) == full[:4]


def test_a_step_without_a_prompt_is_skipped_as_a_base(store, run, db_path):
    episode = store.episodes.add_episode(make_episode(run))
    texts = [_prompt(0), "", _prompt(2)]
    for k, text in enumerate(texts):
        store.episodes.add_step(make_step(episode.id, k, prompt=text, actor="model" if text else "human"))
    assert json.loads(store.episodes.steps(episode.id)[2].prompt)["base"] == 0
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(3)] == texts
    assert _in_sql(db_path, episode.id) == [texts[0], texts[2]]  # the view lists steps with a prompt


def test_an_older_s3gym_refuses_a_file_with_parts(tmp_path, monkeypatch):
    path = tmp_path / "v16.db"
    Store(path).close()
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:-1])  # the code before parts
    with pytest.raises(StoreError, match="newer s3gym"):
        Store(path)


def test_a_cached_prompt_is_only_used_for_the_row_it_was_built_from(store, run, db_path):
    episode, full = _episode(store, run, n=5)
    assert store.prompts.step_prompt(episode.id, 4) == full[4]  # now cached in this store
    conn = sqlite3.connect(db_path)
    conn.execute('DELETE FROM steps WHERE episode_id = ? AND "index" = 4', (episode.id,))
    conn.commit()
    with pytest.raises(StoreError, match="no step 4"):
        store.prompts.step_prompt(episode.id, 4)
    replaced = _prompt(4, " replaced")
    conn.execute('UPDATE episodes SET n_steps = 4 WHERE id = ?', (episode.id,))
    conn.commit()
    store.episodes.add_step(make_step(episode.id, 4, prompt=replaced))
    assert store.prompts.step_prompt(episode.id, 4) == replaced


def test_copies_are_in_utf8_bytes_and_rebuild_text_beyond_ascii(store, run, db_path):
    accents = lambda k: f" é ü {'漢字' * (k % 3)} 🎲{k} ñ" + "ß" * k
    episode, full = _episode(store, run, extra=accents)
    assert not full[5].isascii()
    steps = store.episodes.steps(episode.id)
    copies = [part for s in steps[1:] for part in json.loads(s.prompt)["parts"] if isinstance(part, list)]
    assert any(p[0] + p[1] > len(full[0]) for p in copies)  # offsets past the characters: bytes
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(12)] == full
    assert _in_sql(db_path, episode.id) == full


@pytest.mark.parametrize("seed", range(4))
def test_encode_keeps_the_smaller_form_without_encoding_the_whole_when_the_delta_is_shorter(seed, monkeypatch):
    """encode's choice is the smaller of the whole form and the delta (as before the shortcut), and the
    whole prompt is only dumped when the delta is not already shorter than the text itself."""
    import random

    rng = random.Random(seed)
    words = ["[{\"role\":", "\"user\"", "board", "\\n", "é", "\"quote\"", "x" * 40, "row .*..*.", "ok"]
    for _ in range(60):
        base = "".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
        text = (base[:rng.randint(0, len(base))] + "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
                if rng.random() < 0.7 else "".join(rng.choice(words) for _ in range(rng.randint(1, 30))))
        whole = stored_prompt.dump(None, text, [text])
        delta = stored_prompt.dump(3, text, stored_prompt.in_bytes(stored_prompt.diff(text, base), base))
        expected = delta if len(delta) < len(whole) else whole
        dumped = []
        real_dump = stored_prompt.dump
        monkeypatch.setattr(stored_prompt, "dump", lambda b, t, p: dumped.append(b) or real_dump(b, t, p))
        got = stored_prompt.encode(text, (3, base))
        monkeypatch.setattr(stored_prompt, "dump", real_dump)
        assert got == expected
        assert (None in dumped) == (len(delta) >= len(text))  # the whole form only when it could be smaller
        assert stored_prompt.apply(json.loads(got)["parts"], base, lambda k: "") == text


@pytest.mark.parametrize("how", ["add_step", "add_steps batch", "two batches"])
def test_each_prompt_is_stored_against_the_base_the_stride_rule_picks(store, run, db_path, how):
    """The base of every stored prompt is stored_prompt.base_index over ALL earlier steps with a prompt
    (the store looks up only the latest one and the one STRIDE back): steps without a prompt (a
    person's moves) are skipped, every STRIDE-th step goes STRIDE back when that step has a prompt."""
    episode = store.episodes.add_episode(make_episode(run))
    n = 3 * stored_prompt.STRIDE + 5
    no_prompt = {3, 9, 2 * stored_prompt.STRIDE, 2 * stored_prompt.STRIDE + 1, 3 * stored_prompt.STRIDE - 1}
    full = ["" if k in no_prompt else _prompt(k) for k in range(n)]
    steps = [make_step(episode.id, k, prompt=text) for k, text in enumerate(full)]
    if how == "add_step":
        for step in steps:
            store.episodes.add_step(step)
    elif how == "add_steps batch":
        store.episodes.add_steps(steps)
    else:
        store.episodes.add_steps(steps[:13])
        store.episodes.add_steps(steps[13:])
    conn = sqlite3.connect(db_path)
    try:
        stored = dict(conn.execute('SELECT "index", prompt FROM steps WHERE episode_id = ?', (episode.id,)))
    finally:
        conn.close()
    bases = {k: stored_prompt.parse(stored[k]).base for k in range(n) if full[k]}
    for k, base in bases.items():
        expected = stored_prompt.base_index(k, [i for i in range(k) if full[i]])
        # a prompt is stored whole (base None) when that is shorter, never against another base
        assert base in (expected, None), (k, base, expected)
    stride = stored_prompt.STRIDE
    assert bases[stride] == 0  # STRIDE back: step 0 has a prompt
    assert bases[3 * stride] == 3 * stride - 2  # STRIDE back has none, nor has the step before: the latest
    assert [Store(db_path, check=False).prompts.step_prompt(episode.id, k) for k in range(n)] == full
