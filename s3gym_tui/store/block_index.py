"""The index of a prompt's aligned blocks that prompt_delta.diff looks copies up in, kept for the
prompts an episode will be diffed against next, each derived from the previous prompt's index.

An episode's next prompt is diffed against its current one, which repeats almost all of the prompt
before it (a History run's prompt is some 400,000 characters, of which a step adds a few thousand).
Building the index from scratch slices every block of the base at every step (about 10 ms a step
there); the base's index is instead the previous base's index, cut where the two prompts first
differ, plus the blocks after that. Same dict, same order (first position of each block), so the
same ops. Entries are found by the identity of the text (a text is kept while its entry is), used
once (the next prompt replaces its base), and bounded in characters like the store's prompt cache.
"""

from __future__ import annotations

import threading

from s3gym_tui.store.text_cache import TextLRU

BLOCK = 32  # the shortest copy looked for after the common prefix (shorter runs stay literal)
CACHE_CHARS = 8_000_000  # characters of the prompts whose index is kept

_lock = threading.Lock()
_recent = TextLRU(CACHE_CHARS, lambda entry: entry[0])  # id(text) -> (text, its index)


def build(text: str, start: int = 0, into: dict[str, int] | None = None) -> dict[str, int]:
    """Block -> its first position among the positions start, start + BLOCK, ... of `text` (added to
    `into`, whose positions all come before `start`)."""
    index = {} if into is None else into
    for p in range(start, len(text) - BLOCK + 1, BLOCK):
        index.setdefault(text[p:p + BLOCK], p)
    return index


def take(base: str) -> dict[str, int]:
    """The index of `base`: the one kept for this very text (removed from the cache: the caller
    derives the next prompt's from it), else built now."""
    with _lock:
        entry = _recent.get(id(base))
        if entry is not None and entry[0] is base:
            _recent.pop(id(base))
            return entry[1]
    return build(base)


def keep(text: str, base: str, base_index: dict[str, int], same: int) -> None:
    """Keep the index of `text`, whose first `same` characters are `base`'s: `base_index` (taken,
    so changed in place) without its blocks from the first one that is not wholly in the shared
    part, plus `text`'s blocks from there."""
    cut = same - same % BLOCK  # blocks before `cut` are the same text at the same place in both
    doomed = []
    for key in reversed(base_index):  # positions only grow in insertion order
        if base_index[key] < cut:
            break
        doomed.append(key)
    for key in doomed:
        del base_index[key]
    index = build(text, cut, base_index)
    with _lock:
        _recent.put(id(text), (text, index))


def clear() -> None:
    """Forget every kept index (tests, and a store that wants its memory back)."""
    with _lock:
        _recent.clear()
