"""Schema 16: every stored prompt rewritten from the v2-v15 layout (compact text with `[[text:<key>]]`
references, `[[delta]]` JSON) to its parts (stored_prompt.py), which plain SQL joins back.

A delta against an earlier step of its own episode (what every s3gym since schema 5 stores) keeps its
copies (offsets now in UTF-8 bytes), length and CRC, its new text expanded: its prompt is rebuilt with
the old rules (CRC checked: one that does not rebuild stops the upgrade, which then leaves the file as
it was), not searched for copies again. A whole prompt is expanded, its shared part kept shared; a
delta against another episode's step (a fork's copy before schema 5) is stored again against its own
episode. The shared texts become the parts as they appear in prompts (JSON-escaped), keyed by the
hash of that form (a text no prompt referred to is left as it was).
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Callable, Optional

from s3gym_tui.store import prompt_delta, stored_prompt
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.stored_prompt import text_key

_OLD_REF = re.compile(r"\[\[text:([0-9a-f]{32})\]\]")
_OLD_ESCAPED = "[[text\\u003a"  # a literal "[[text:" in an old prompt


class _OldLayout:
    """Reads prompts stored in the v2-v15 layout of one file."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.texts: dict[str, Optional[str]] = {}
        self.rows: dict[str, dict[int, str]] = {}
        self.full: dict[tuple[str, int], str] = {}

    def text(self, key: str) -> Optional[str]:
        if key not in self.texts:
            row = self.conn.execute("SELECT text FROM texts WHERE key = ?", (key,)).fetchone()
            self.texts[key] = row[0] if row else None
        return self.texts[key]

    def expand(self, compact: str) -> str:
        """A compact-form text with its references and escapes undone (an unknown key stays as it is)."""
        if "[[text:" in compact:
            def sub(match: "re.Match[str]") -> str:
                text = self.text(match.group(1))
                return match.group(0) if text is None else json.dumps(text, ensure_ascii=False)[1:-1]

            compact = _OLD_REF.sub(sub, compact)
        return compact.replace(_OLD_ESCAPED, "[[text:")

    def episode_rows(self, episode_id: str) -> dict[int, str]:
        if episode_id not in self.rows:
            self.rows[episode_id] = dict(self.conn.execute(
                'SELECT "index", prompt FROM steps WHERE episode_id = ? ORDER BY "index"', (episode_id,)))
        return self.rows[episode_id]

    def prompt(self, episode_id: str, index: int) -> str:
        """Step `index`'s prompt as sent, rebuilt from the old stored forms (bases first)."""
        what = f"the prompt of step {index} of episode {episode_id!r}"
        if (episode_id, index) in self.full:
            return self.full[(episode_id, index)]
        chain, j, e = [], index, episode_id
        while True:  # the chain of bases, without recursion (an episode may be long)
            stored = self.episode_rows(e).get(j)
            if stored is None:
                raise StoreError(f"{what} does not rebuild (its base, step {j} of episode {e!r}, is missing)")
            chain.append((e, j, stored))
            if not prompt_delta.is_delta(stored) or (e, j) in self.full:
                break
            d = _parse(stored, what)
            e, j = d.episode_id, d.base_index
        for e, j, stored in reversed(chain):
            if (e, j) in self.full:
                continue
            if not prompt_delta.is_delta(stored):
                self.full[(e, j)] = self.expand(stored)
                continue
            d = _parse(stored, what)
            base = self.full[(d.episode_id, d.base_index)]
            try:
                text = prompt_delta.apply(d.ops, base, self.expand)
            except ValueError as err:
                raise StoreError(f"{what} does not rebuild ({err})") from err
            if len(base) != d.base_length or len(text) != d.length or prompt_delta.crc(text) != d.crc:
                raise StoreError(f"{what} does not rebuild to the prompt that was stored")
            self.full[(e, j)] = text
        return self.full[(episode_id, index)]

    def shared_part(self, stored: str) -> tuple[Optional[str], Optional[str]]:
        """(its key, the shared text an old whole prompt referred to, as it appears in the prompt)."""
        if prompt_delta.is_delta(stored):
            return None, None
        match = _OLD_REF.search(stored)
        text = self.text(match.group(1)) if match else None
        return (None, None) if text is None else (match.group(1), json.dumps(text, ensure_ascii=False)[1:-1])

    def forget(self, episode_id: str, keep_rows: bool) -> None:
        if not keep_rows:
            self.rows.pop(episode_id, None)
        self.full = {k: v for k, v in self.full.items() if k[0] != episode_id}


def _parse(stored: str, what: str) -> prompt_delta.Delta:
    try:
        return prompt_delta.parse(stored)
    except ValueError as err:
        raise StoreError(f"{what} does not rebuild ({err})") from err


def _converted(old: _OldLayout, episode_id: str, index: int, stored: str, with_prompt: list[int],
               shared: dict[str, str], replaced: set[str]) -> str:
    """The stored form of schema 16 of one old stored prompt. A delta against an earlier step of its own
    episode keeps its copies, length and CRC (the same CRC-32), its new text expanded. A whole prompt is expanded, its shared part kept shared; a delta against another
    episode's step is rebuilt and stored again against its own episode."""
    if prompt_delta.is_delta(stored):
        d = _parse(stored, f"the prompt of step {index} of episode {episode_id!r}")
        if d.episode_id == episode_id and d.base_index in with_prompt:
            old.prompt(episode_id, index)  # rebuilt once (CRC checked), the base of the next ones
            parts = stored_prompt.in_bytes([op if isinstance(op, list) else old.expand(op) for op in d.ops],
                                           old.prompt(episode_id, d.base_index))
            return json.dumps({"base": d.base_index, "length": d.length, "crc": d.crc, "parts": parts},
                              ensure_ascii=False, separators=(",", ":"))
    text = old.prompt(episode_id, index)
    b = stored_prompt.base_index(index, with_prompt)
    new = stored_prompt.encode(text, None if b is None else (b, old.prompt(episode_id, b)))
    old_key, part = old.shared_part(stored)
    if new.startswith('{"base":null,') and part and part in text:
        replaced.add(old_key)
        key = text_key(part)
        shared[key] = part
        new = stored_prompt.encode(text, None, (key, part))
    return new


def prompt_parts_v16(conn: sqlite3.Connection, progress: Callable[[str], None] = lambda episode_id: None) -> None:
    """Rewrite every stored prompt as parts, inside the caller's transaction (`progress` is called
    after each episode: tests use it to stop an upgrade half-way)."""
    old = _OldLayout(conn)
    shared: dict[str, str] = {}  # new key -> part
    replaced: set[str] = set()  # the old keys of those parts (a text nothing referred to is left as it was)
    episodes = [r[0] for r in conn.execute("SELECT DISTINCT episode_id FROM steps ORDER BY episode_id")]
    # episodes other episodes' deltas are based on (a fork's copies, before v5): their old rows are
    # read now, before they are rewritten, and kept
    sources = {r[0] for r in conn.execute(
        "SELECT DISTINCT json_extract(substr(prompt, 10), '$[0]') FROM steps WHERE prompt LIKE '[[delta]]%' "
        "AND json_valid(substr(prompt, 10)) AND json_extract(substr(prompt, 10), '$[0]') <> episode_id")}
    for source in sources:
        old.episode_rows(source)
    for episode_id in episodes:
        rows = conn.execute('SELECT id, "index", prompt FROM steps WHERE episode_id = ? ORDER BY "index"',
                            (episode_id,)).fetchall()
        with_prompt: list[int] = []
        for step_id, index, stored in rows:
            if stored == "":
                continue
            conn.execute("UPDATE steps SET prompt = ? WHERE id = ?",
                         (_converted(old, episode_id, index, stored, with_prompt, shared, replaced), step_id))
            with_prompt.append(index)
        old.forget(episode_id, keep_rows=episode_id in sources)
        progress(episode_id)
    conn.executemany("DELETE FROM texts WHERE key = ?", [(k,) for k in replaced])
    conn.executemany("INSERT OR REPLACE INTO texts (key, text) VALUES (?, ?)", shared.items())
