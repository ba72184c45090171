"""Stored prompts read back exactly as sent: a step's parts (store/stored_prompt.py) joined in order,
copies from its base step's prompt and shared parts from `texts` (the store's `prompts` repository).

Reading step k's prompt rebuilds the chain of its bases in one range scan of the episode's steps;
full prompts are kept in a small per-Store cache (stored prompts never change once written), so
reading an episode's prompts in order costs one join each. Every reader (the engine, exports,
replay, the app) goes through step_prompt / prompt_of; SQL tools read the view `step_prompts`.
"""

from __future__ import annotations

from typing import Optional

from s3gym_tui.models import Step
from s3gym_tui.secrets import redact_values
from s3gym_tui.store import stored_prompt
from s3gym_tui.store.text_cache import TextLRU
from s3gym_tui.store.stored_prompt import text_key
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.repository import Repository

CACHE_CHARS = 8_000_000  # full prompts kept per Store (about 16 MB)
SHARED_MIN_CHARS = 512  # a shorter shared part is kept inline
WHOLE = '{"base":null,'  # a stored prompt without copies


class Prompts(Repository):
    """Shared prompt parts, encoding and reading prompts. Reads and writes `texts`; reads `steps` (a prompt's bases)."""

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

    def _shared(self, key: str) -> str:
        text = self.get_text(key)
        if text is None:
            raise ValueError(f"its shared part {key} is missing")
        return text

    # ------------------------------------------------------------------ writing

    def encode(self, text: str, base: Optional[tuple[int, str]] = None,
               shared: Optional[str] = None) -> str:
        """The stored form of `text` (a prompt as sent, secrets already redacted) against `base`
        ((step index, its prompt)); `shared`: a large part of it that other prompts repeat (an
        episode's Hint Messages, as it appears in the prompt), stored once in `texts`."""
        stored = stored_prompt.encode(text, base)
        if not stored.startswith(WHOLE) or not shared or len(shared) < SHARED_MIN_CHARS or shared not in text:
            return stored
        key = self.put_text(shared)
        if self.get_text(key) != shared:  # changed by the redaction of secrets: kept inline
            return stored
        return stored_prompt.encode(text, None, (key, shared))

    # ------------------------------------------------------------------ full prompts

    def step_prompt(self, episode_id: str, index: int) -> str:
        """The prompt of a step exactly as sent (its parts joined)."""
        return self._full_prompt(episode_id, index)

    def prompt_of(self, step: Step) -> str:
        """The prompt of a step read with `steps()` (with or without prompts) exactly as sent; ''
        for a step without one (a person's move)."""
        return self._full_prompt(step.episode_id, step.index, step.prompt or None)

    def _prompt_cache(self) -> TextLRU:
        """(episode id, step index) -> [stored form, full prompt, CRC checked], least recently used
        first. A prompt rebuilt only as the base of another is kept unchecked until asked for."""
        cache = self.__dict__.get("_prompts")
        if cache is None:
            cache = self.__dict__["_prompts"] = TextLRU(CACHE_CHARS, lambda entry: entry[1])
        return cache

    def _cached(self, episode_id: str, index: int, stored: str, checked: bool = True) -> Optional[str]:
        """The cached full prompt of that step if it was rebuilt from this very stored form (and,
        with `checked`, its CRC matches the stored one)."""
        cache = self._prompt_cache()
        hit = cache.get((episode_id, index))
        if hit is None or hit[0] != stored:
            return None
        if checked and not hit[2]:
            p = self._parse(stored, f"the prompt of step {index} of episode {episode_id!r}")
            if stored_prompt.crc(hit[1]) != p.crc:
                cache.pop((episode_id, index))
                return None
            hit[2] = True
        cache.touch((episode_id, index))
        return hit[1]

    def _remember(self, episode_id: str, index: int, stored: str, text: str, checked: bool = True) -> None:
        if self._db.conn is not None and self._db.conn.in_transaction:
            return  # not committed yet: a rollback must not leave it behind
        self._prompt_cache().put((episode_id, index), [stored, text, checked])

    def _parse(self, stored: str, what: str) -> stored_prompt.StoredPrompt:
        try:
            return stored_prompt.parse(stored)
        except ValueError as err:
            raise StoreError(f"{what} is corrupt ({err})") from err

    def _rebuild(self, p: stored_prompt.StoredPrompt, base: Optional[str], what: str, check: bool = True) -> str:
        try:
            text = stored_prompt.apply(p.parts, base, self._shared)
        except ValueError as err:
            raise StoreError(f"{what} is corrupt ({err})") from err
        if len(text) != p.length or (check and stored_prompt.crc(text) != p.crc):
            raise StoreError(f"{what} is corrupt (it does not rebuild to the prompt that was stored)")
        return text

    def _full_prompt(self, episode_id: str, index: int, stored: Optional[str] = None) -> str:
        """Step `index`'s full prompt (`stored`: its stored form, when the caller has it). Its base
        chain is read in one range scan; every prompt rebuilt on the way is cached under its stored
        form, so a cached text is only used for the very row it was built from (a step removed and
        stored again is read afresh)."""
        with self._db._reading("read a prompt") as conn:
            if stored is None:
                row = conn.execute('SELECT prompt FROM steps WHERE episode_id = ? AND "index" = ?',
                                   (episode_id, index)).fetchone()
                if row is None:
                    raise StoreError(f"no step {index} in episode {episode_id!r}")
                stored = row[0]
            if stored == "":
                return ""
            hit = self._cached(episode_id, index, stored)
            if hit is not None:
                return hit
            first = self._parse(stored, f"the prompt of step {index} of episode {episode_id!r}")
            rows = {} if first.base is None else dict(conn.execute(
                'SELECT "index", prompt FROM steps WHERE episode_id = ? AND "index" < ? ORDER BY "index"',
                (episode_id, index)))
        rows[index] = stored
        chain = []  # this step, then its bases down to one that is cached or has no base
        parsed: dict[int, stored_prompt.StoredPrompt] = {index: first}
        built: dict[int, str] = {}
        j = index
        while True:
            chain.append(j)
            p = parsed[j]
            if p.base is None:
                break
            if not 0 <= p.base < j or rows.get(p.base) is None:
                raise StoreError(f"the prompt of step {j} of episode {episode_id!r} is corrupt "
                                 f"(its base step {p.base} is missing)")
            j = p.base
            hit = self._cached(episode_id, j, rows[j], checked=False)
            if hit is not None:
                built[j] = hit
                break
            parsed[j] = self._parse(rows[j], f"the prompt of step {j} of episode {episode_id!r}")
        for j in reversed(chain):  # only the prompt asked for is CRC-checked now (the rest on demand)
            p = parsed[j]
            what = f"the prompt of step {j} of episode {episode_id!r}"
            built[j] = self._rebuild(p, None if p.base is None else built[p.base], what,
                                     check=j == index or p.base is None)
            self._remember(episode_id, j, rows[j], built[j], checked=j == index or p.base is None)
        return built[index]
