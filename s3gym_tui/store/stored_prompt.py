"""A step's stored prompt (schema 16): its parts in order, as JSON that plain SQL can join back.

    {"base": <step index or null>, "length": <chars>, "crc": <CRC-32>, "parts": [...]}

The prompt as sent (the messages JSON) is the concatenation of `parts`, in order:
- `[start, length]`: that slice, in UTF-8 bytes, of the prompt of step `base` of the same episode
  (bytes, not characters: SQLite's substr on a BLOB finds an offset at once, on TEXT it walks it);
- a string: text exactly as sent;
- `{"text": <key>}`: a shared part stored once in `texts` (an episode's Hint Messages block, which
  a History run's evaluation episodes share), exactly as it appears in the prompt.

A step's prompt repeats almost all of an earlier one (system text, Hint Messages, the turns so far,
the rules), so all but an episode's first prompt are copies of a base plus a little new text: an
episode costs O(n), not O(n^2). `length` and `crc` (of the UTF-8 bytes) let a reader prove that it
rebuilt the prompt character for character. The SQL view `step_prompts` (views.py) does the same
join with a recursive CTE over the bases. An empty stored prompt is a step without one (a person's
move). A prompt as sent is JSON that starts with `[`, a stored one starts with `{`.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from typing import Callable, Optional, Union

from s3gym_tui.store.prompt_delta import diff

def text_key(text: str) -> str:
    """The key of a shared part in `texts`."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


PREFIX = '{"base":'
STRIDE = 8  # every STRIDE-th step is based STRIDE steps back (see base_index)
SHARED_REF = re.compile(r'\{"text":"([0-9a-f]{32})"\}')  # a shared part in a stored prompt
SHARED_LIKE = '%{"text":"%'  # SQL LIKE pattern of the stored prompts that may have one

Part = Union[list, str, dict]


@dataclass(frozen=True)
class StoredPrompt:
    """A parsed stored prompt."""

    base: Optional[int]
    length: int
    crc: int
    parts: tuple[Part, ...]


def is_stored(prompt: str) -> bool:
    """True for a stored form, False for a prompt as sent (or any other text)."""
    return prompt.startswith(PREFIX)


def crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def parse(stored: str) -> StoredPrompt:
    """The parts of a stored prompt (ValueError if it is not a well-formed one)."""
    if not is_stored(stored):
        raise ValueError("not a stored prompt")
    try:
        data = json.loads(stored)
    except ValueError as err:
        raise ValueError(f"not valid JSON: {err}") from err
    base, length, check, parts = (data.get(k) for k in ("base", "length", "crc", "parts"))
    if not (isinstance(parts, list) and (base is None or _int(base)) and _int(length) and _int(check)):
        raise ValueError("malformed stored prompt")
    return StoredPrompt(base, length, check, tuple(parts))


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def apply(parts: tuple[Part, ...] | list[Part], base: Optional[str], shared: Callable[[str], str]) -> str:
    """The prompt the parts make: copies sliced from `base`, shared parts read through `shared`
    (key -> text). ValueError for a malformed part or a copy without a base; a copy reaching past its
    base gives a shorter text (the caller checks the length and CRC)."""
    try:
        if base is None or base.isascii():  # byte offsets are character offsets
            return "".join([part if type(part) is str else base[part[0]:part[0] + part[1]] if type(part) is list
                            else shared(part["text"]) for part in parts])  # type: ignore[index]
        raw = _utf8(base)
        return b"".join([_utf8(part) if type(part) is str else raw[part[0]:part[0] + part[1]] if type(part) is list
                         else _utf8(shared(part["text"])) for part in parts]).decode("utf-8", "surrogatepass")
    except (TypeError, IndexError, KeyError, UnicodeDecodeError) as err:
        raise ValueError(f"malformed part ({err})") from err


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def in_bytes(parts: list[Part], base: str) -> list[Part]:
    """Parts whose copies are in characters of `base`, with their copies in UTF-8 bytes."""
    if base.isascii():
        return parts
    return [[len(_utf8(base[:p[0]])), len(_utf8(base[p[0]:p[0] + p[1]]))] if type(p) is list else p for p in parts]


def dump(base: Optional[int], text: str, parts: list[Part]) -> str:
    return json.dumps({"base": base, "length": len(text), "crc": crc(text), "parts": parts},
                      ensure_ascii=False, separators=(",", ":"))


def encode(text: str, base: Optional[tuple[int, str]] = None,
           shared: Optional[tuple[str, str]] = None) -> str:
    """The stored form of `text` (a prompt as sent): copies of `base` ((step index, its prompt)) plus
    new text when that is smaller, else the text whole, with `shared` ((key, part)) referenced in
    place of that part when it occurs. The result always rebuilds to `text` (checked here)."""
    whole: list[Part] = [text]
    if shared is not None and shared[1]:
        at = text.find(shared[1])
        if at >= 0:
            whole = [p for p in (text[:at], {"text": shared[0]}, text[at + len(shared[1]):]) if p != ""]
    whole_form = None
    if base is not None:
        delta = dump(base[0], text, in_bytes(diff(text, base[1]), base[1]))
        # the whole form of the text alone is longer than the text: a delta shorter than the text is
        # the smaller without encoding the whole (a large prompt's JSON) only to compare their lengths
        if whole != [text] or len(delta) >= len(text):
            whole_form = dump(None, text, whole)
        if (whole_form is None or len(delta) < len(whole_form)) \
                and apply(json.loads(delta)["parts"], base[1], _no_shared) == text:
            return delta
    return whole_form if whole_form is not None else dump(None, text, whole)


def _no_shared(key: str) -> str:
    raise ValueError("a delta has no shared part")


def base_index(index: int, with_prompt: list[int]) -> Optional[int]:
    """The step whose prompt step `index`'s is stored against: the latest earlier step with a prompt,
    except that every STRIDE-th step is based STRIDE steps back, so rebuilding any prompt walks at most
    about index/STRIDE + STRIDE copies. `with_prompt`: the earlier steps with a prompt, in order."""
    if not with_prompt:
        return None
    back = stride_base(index)
    if back is not None and back in with_prompt:
        return back
    return with_prompt[-1]


def stride_base(index: int) -> Optional[int]:
    """The step STRIDE back that step `index` is based on when that step has a prompt (every STRIDE-th
    step; None for the others): with the latest earlier step with a prompt, all base_index can choose."""
    return index - STRIDE if index % STRIDE == 0 and index >= STRIDE else None
