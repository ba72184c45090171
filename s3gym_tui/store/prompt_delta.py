"""Deltas between prompts: the copies and new text that rebuild a prompt from an earlier one (diff,
used by stored_prompt.py), and the `[[delta]]` form schemas 4-15 stored (read by migrate_prompts.py).

A step's prompt repeats almost all of the previous step's prompt: the system text, the Hint Messages,
every earlier turn of the episode, the rules. Storing each in full grows as O(n^2) in the episode
length; storing it as a delta against the previous prompt of the same episode keeps it O(n) and
exact. Stored form of schemas 4-15:

    [[delta]]["<episode id>", <base index>, <base length>, <base crc>, <length>, <crc>, <ops>]

`ops` is a list of `[start, length]` (copy that slice of the base's full text) and strings (new
text, in the store's compact form: `[[text:` escaped, shared parts as `[[text:<key>]]`, see
migrate_prompts.py). Lengths are in characters of the full texts; the CRC-32s (of the UTF-8 bytes)
let a reader prove it rebuilt the prompt byte for byte, and a fork check that its copied base is
the same text. A prompt as sent is JSON that starts with `[{`,
so the `[[delta]]` prefix never occurs in one.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Callable, Union

from s3gym_tui.store import block_index

DELTA_PREFIX = "[[delta]]"
BLOCK = block_index.BLOCK
_CHUNK = 4096

Op = Union[list, str]


@dataclass(frozen=True)
class Delta:
    """A parsed delta prompt."""

    episode_id: str
    base_index: int
    base_length: int
    base_crc: int
    length: int
    crc: int
    ops: tuple[Op, ...]


def is_delta(stored: str) -> bool:
    return stored.startswith(DELTA_PREFIX)


def crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def parse(stored: str) -> Delta:
    """The delta in a stored prompt (ValueError if it is not a well-formed one)."""
    if not is_delta(stored):
        raise ValueError("not a delta prompt")
    data = json.loads(stored[len(DELTA_PREFIX):])
    if not (isinstance(data, list) and len(data) == 7 and isinstance(data[0], str)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in data[1:6])
            and isinstance(data[6], list)):
        raise ValueError("malformed delta prompt")
    return Delta(data[0], data[1], data[2], data[3], data[4], data[5], tuple(data[6]))


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (compared a chunk at a time, then bisected)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i:i + _CHUNK] == b[i:i + _CHUNK]:
        i += _CHUNK
    if i >= n:
        return n
    lo, hi = i, min(i + _CHUNK, n)  # a[:lo] == b[:lo]; they differ at some position < hi
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo:mid + 1] == b[lo:mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _extend(a: str, i: int, b: str, p: int) -> int:
    """Length of the common run of a[i:] and b[p:]."""
    n = min(len(a) - i, len(b) - p)
    k = 0
    step = 256
    while k < n:
        m = min(step, n - k)
        if a[i + k:i + k + m] == b[p + k:p + k + m]:
            k += m
            continue
        if step == 1:
            break
        step = max(1, step // 8)
    return k


def diff(text: str, base: str) -> list[Op]:
    """Ops that rebuild `text` from `base`: the common prefix, then copies of runs of at least
    BLOCK characters found through an index of the base's aligned blocks, literals between."""
    ops: list[Op] = []
    start = common_prefix(text, base)
    if start:
        ops.append([0, start])
    index = block_index.take(base)
    i = literal = start
    end = len(text) - BLOCK
    while i <= end:
        p = index.get(text[i:i + BLOCK])
        if p is None:
            i += 1
            continue
        while i > literal and p > 0 and text[i - 1] == base[p - 1]:
            i, p = i - 1, p - 1
        n = _extend(text, i, base, p)
        if i > literal:
            ops.append(text[literal:i])
        ops.append([p, n])
        i = literal = i + n
    if literal < len(text):
        ops.append(text[literal:])
    block_index.keep(text, base, index, start)  # the next prompt of the episode is diffed against this one
    return ops


def apply(ops: tuple[Op, ...] | list[Op], base: str, literal: Callable[[str], str]) -> str:
    """The full text of a delta: copies sliced from `base`, literals through `literal` (which
    turns the stored compact form back into text). ValueError for a malformed op."""
    try:
        return "".join([base[op[0]:op[0] + op[1]] if type(op) is list else literal(op) for op in ops])
    except (TypeError, IndexError, AttributeError) as err:
        raise ValueError(f"malformed delta op ({err})") from err
