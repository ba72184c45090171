"""Stored prompts read back exactly as sent: shared parts (`[[text:<key>]]`) and deltas against the
previous prompt of the episode (prompt_delta.py), expanded on read (the store's `prompts` repository).

A prompt is stored in one of two forms:
- compact: the messages JSON as sent, with `[[text:` escaped and large shared blocks (an episode's
  Hint Messages) replaced by `[[text:<key>]]`, the block itself stored once in `texts`;
- delta (schema v3): copies from the full prompt of an earlier step of the same episode plus new
  text in compact form, so an episode costs O(n) however much history each prompt repeats.

Reading step k's prompt rebuilds the chain of its bases in one range scan of the episode's steps;
full prompts are kept in a small per-Store cache (stored prompts never change once written), so
reading an episode's prompts in order costs one delta each.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from typing import Optional

from s3gym_tui.models import Step
from s3gym_tui.secrets import redact_values
from s3gym_tui.store import prompt_delta
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.repository import Repository

TEXT_REF_PREFIX = "[[text:"
TEXT_REF = re.compile(r"\[\[text:([0-9a-f]{32})\]\]")
# A literal "[[text:" typed into a prompt (an action, an observation, a human-edited summary) must
# not read back as a reference: stored prompts carry it with the colon JSON-escaped (`\u003a`),
# which json.loads reads as the same text and TEXT_REF does not match. json.dumps never writes
# `\u003a` itself, so expand_prompt can undo exactly these escapes.
TEXT_REF_ESCAPED = "[[text\\u003a"
CACHE_CHARS = 8_000_000  # full prompts kept per Store (about 16 MB)


def text_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


def escape_refs(prompt_json: str) -> str:
    """Make every literal `[[text:` in a prompt (messages JSON) inert (same JSON value)."""
    return prompt_json.replace(TEXT_REF_PREFIX, TEXT_REF_ESCAPED)


def unescape_refs(text: str) -> str:
    """Inverse of escape_refs (for compact text that holds no references)."""
    return text.replace(TEXT_REF_ESCAPED, TEXT_REF_PREFIX)


def compact_prompt(prompt_json: str, key: str, text: str) -> str:
    """Replace the JSON-escaped `text` inside a prompt (messages JSON) by a `[[text:key]]` reference
    (literal `[[text:` elsewhere in the prompt is escaped first, see escape_refs)."""
    prompt_json = escape_refs(prompt_json)
    escaped = escape_refs(json.dumps(text, ensure_ascii=False)[1:-1])
    return prompt_json.replace(escaped, f"{TEXT_REF_PREFIX}{key}]]") if escaped else prompt_json


class Prompts(Repository):
    """Shared prompt parts and prompt expansion. Reads and writes `texts`; reads `steps` (a delta's bases)."""

    # ------------------------------------------------------------------ shared parts

    def put_text(self, text: str) -> str:
        """Store a large shared prompt part once (secret values redacted); returns its key (a
        content hash of what is stored)."""
        text = redact_values(text)
        key = text_key(text)
        with self._db._tx("store a shared prompt part") as conn:
            conn.execute("INSERT OR IGNORE INTO texts (key, text) VALUES (?, ?)", (key, text))
        return key

    def get_text(self, key: str) -> Optional[str]:
        with self._db._reading("read a shared prompt part") as conn:
            row = conn.execute("SELECT text FROM texts WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _expand_refs(self, prompt: str) -> str:
        """A compact-form text with its `[[text:<key>]]` references and escapes undone."""
        if TEXT_REF_PREFIX in prompt:
            def sub(match: "re.Match[str]") -> str:
                text = self.get_text(match.group(1))
                return match.group(0) if text is None else json.dumps(text, ensure_ascii=False)[1:-1]

            prompt = TEXT_REF.sub(sub, prompt)
        return prompt.replace(TEXT_REF_ESCAPED, TEXT_REF_PREFIX)

    # ------------------------------------------------------------------ full prompts

    def expand_prompt(self, prompt: str) -> str:
        """A stored prompt (compact or delta form) as it was sent."""
        if not prompt_delta.is_delta(prompt):
            return self._expand_refs(prompt)
        return self._apply_delta(self._parse(prompt, "a stored prompt"), "a stored prompt")

    def step_prompt(self, episode_id: str, index: int) -> str:
        """The prompt of a step exactly as sent (shared parts and deltas expanded)."""
        return self._full_prompt(episode_id, index)

    def prompt_of(self, step: Step) -> str:
        """The prompt of a step read with `steps()` (with or without prompts) exactly as sent."""
        return self._full_prompt(step.episode_id, step.index, step.prompt or None)

    def _prompt_cache(self) -> "OrderedDict[tuple[str, int], list]":
        """(episode id, step index) -> [stored form, full prompt, CRC checked], least recently used
        first. A prompt rebuilt only as the base of another is kept unchecked until asked for."""
        cache = self.__dict__.get("_prompts")
        if cache is None:
            cache = self.__dict__["_prompts"] = OrderedDict()
            self.__dict__["_prompt_chars"] = 0
        return cache

    def _cached(self, episode_id: str, index: int, stored: str, checked: bool = True) -> Optional[str]:
        """The cached full prompt of that step if it was rebuilt from this very stored form (and,
        with `checked`, its CRC matches the stored one)."""
        cache = self._prompt_cache()
        hit = cache.get((episode_id, index))
        if hit is None or hit[0] != stored:
            return None
        if checked and not hit[2]:
            d = self._parse(stored, f"the prompt of step {index} of episode {episode_id!r}")
            if prompt_delta.crc(hit[1]) != d.crc:
                del cache[(episode_id, index)]
                return None
            hit[2] = True
        cache.move_to_end((episode_id, index))
        return hit[1]

    def _remember(self, episode_id: str, index: int, stored: str, text: str, checked: bool = True) -> None:
        if self._db.conn is not None and self._db.conn.in_transaction:
            return  # not committed yet: a rollback must not leave it behind
        cache = self._prompt_cache()
        old = cache.pop((episode_id, index), None)
        if old is not None:
            self.__dict__["_prompt_chars"] -= len(old[1])
        cache[(episode_id, index)] = [stored, text, checked]
        self.__dict__["_prompt_chars"] += len(text)
        while self.__dict__["_prompt_chars"] > CACHE_CHARS and len(cache) > 1:
            _, (_, dropped, _) = cache.popitem(last=False)
            self.__dict__["_prompt_chars"] -= len(dropped)

    def _parse(self, stored: str, what: str) -> prompt_delta.Delta:
        try:
            return prompt_delta.parse(stored)
        except ValueError as err:
            raise StoreError(f"{what} is corrupt ({err})") from err

    def _apply_delta(self, d: prompt_delta.Delta, what: str) -> str:
        return self._rebuild(d, self._full_prompt(d.episode_id, d.base_index), what)

    def _rebuild(self, d: prompt_delta.Delta, base: str, what: str, check: bool = True) -> str:
        if len(base) != d.base_length:
            raise StoreError(f"{what} is corrupt (its base, step {d.base_index} of episode "
                             f"{d.episode_id!r}, has {len(base)} characters, not {d.base_length})")
        try:
            text = prompt_delta.apply(d.ops, base, self._expand_refs)
        except ValueError as err:
            raise StoreError(f"{what} is corrupt ({err})") from err
        if len(text) != d.length or (check and prompt_delta.crc(text) != d.crc):
            raise StoreError(f"{what} is corrupt (it does not rebuild to the prompt that was stored)")
        return text

    def _full_prompt(self, episode_id: str, index: int, stored: Optional[str] = None) -> str:
        """Step `index`'s full prompt (`stored`: its stored form, when the caller has it). A delta is
        rebuilt from the stored rows of its base chain, read in one range scan; every prompt rebuilt
        on the way is cached under its stored form, so a cached text is only used for the very row
        it was built from (a step removed and stored again is read afresh)."""
        with self._db._reading("read a prompt") as conn:
            if stored is None:
                row = conn.execute('SELECT prompt FROM steps WHERE episode_id = ? AND "index" = ?',
                                   (episode_id, index)).fetchone()
                if row is None:
                    raise StoreError(f"no step {index} in episode {episode_id!r}")
                stored = row[0]
            if not prompt_delta.is_delta(stored):
                return self._expand_refs(stored)
            hit = self._cached(episode_id, index, stored)
            if hit is not None:
                return hit
            rows = dict(conn.execute('SELECT "index", prompt FROM steps WHERE episode_id = ? '
                                     'AND "index" < ? ORDER BY "index"', (episode_id, index)))
        rows[index] = stored
        chain = []  # this step, then its bases down to one that is cached or not a delta
        deltas: dict[int, prompt_delta.Delta] = {}
        built: dict[int, str] = {}
        j = index
        while True:
            chain.append(j)
            text = rows.get(j)
            if text is None:
                raise StoreError(f"the prompt of step {index} of episode {episode_id!r} is corrupt "
                                 f"(its base step {j} is missing)")
            if not prompt_delta.is_delta(text):
                break
            d = deltas[j] = self._parse(text, f"the prompt of step {j} of episode {episode_id!r}")
            if d.episode_id != episode_id or not 0 <= d.base_index < j:
                raise StoreError(f"the prompt of step {j} of episode {episode_id!r} is corrupt "
                                 f"(its base is step {d.base_index} of episode {d.episode_id!r})")
            j = d.base_index
            hit = self._cached(episode_id, j, rows.get(j, ""), checked=False)
            if hit is not None:
                built[j] = hit
                break
        for j in reversed(chain):  # only the prompt asked for is CRC-checked now (the rest on demand)
            text = rows[j]
            d = deltas.get(j)
            full = (self._rebuild(d, built[d.base_index], f"the prompt of step {j} of episode {episode_id!r}",
                                  check=j == index) if d is not None else self._expand_refs(text))
            built[j] = full
            self._remember(episode_id, j, text, full, checked=d is None or j == index)
        return built[index]
