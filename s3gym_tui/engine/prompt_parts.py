"""A prompt (the messages JSON as sent) cut into shared parts for exports: each distinct part is
written once, a step lists its parts' ids in order, and their concatenation is the prompt exactly.

The cuts are content-defined (after a `\\n` escape whose preceding WINDOW characters hash to a
boundary, at least MIN_CHARS after the previous cut), so the same text is cut the same way wherever
it occurs: the Hint Messages shared by a History episode's steps (and repeated, episode by episode, in
later episodes' Hint Messages), and the turns of an episode, which every later prompt repeats. A
step's prompt repeats most of the previous one (what store/prompt_delta.py stores as a delta): only
the text after their common prefix is cut again."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from s3gym_tui.store.prompt_delta import common_prefix
from s3gym_tui.store.stored_prompt import text_key

NEWLINE = "\\n"  # a newline inside a JSON string
# Parts of 2-4 KB: on late prompts of a 30-episode snake History run (390 KB each) 85 ids and 5 KB of new
# text a step, 8.0 KB in all (512 chars and 1 candidate in 32: 13.8 KB; 2048 and 1 in 128: 11.5 KB)
MIN_CHARS = 2048
WINDOW = 32
MASK = 0x3F  # one candidate cut in 64 is a cut


def _cuts(text: str, start: int) -> list[int]:
    """The content-defined cuts of `text` after position `start` (itself a cut, or 0)."""
    cuts, last = [], start
    at = text.find(NEWLINE, start + MIN_CHARS - len(NEWLINE))
    while at >= 0:
        end = at + len(NEWLINE)
        if end - last >= MIN_CHARS and not zlib.crc32(text[end - WINDOW:end].encode("utf-8", "surrogatepass")) & MASK:
            cuts.append(end)
            last = end
            at = text.find(NEWLINE, end + MIN_CHARS - len(NEWLINE))
        else:
            at = text.find(NEWLINE, end)
    return cuts


@dataclass
class PromptParts:
    """Cuts the prompts of a run's steps into parts; remembers the previous prompt of each episode
    (to cut only what is new) and which parts were already handed out."""

    seen: set[str] = field(default_factory=set)
    _last: dict[str, tuple[str, list[int], list[str]]] = field(default_factory=dict)

    def split(self, episode_id: str, text: str) -> tuple[list[str], list[tuple[str, str]]]:
        """(the ids of `text`'s parts in order, the (id, text) of the parts not handed out before)."""
        previous, previous_cuts, previous_ids = self._last.get(episode_id, ("", [], []))
        same = common_prefix(previous, text)  # cuts up to here depend on this common text only
        kept = sum(1 for c in previous_cuts if c <= same)
        cuts = previous_cuts[:kept] + _cuts(text, previous_cuts[kept - 1] if kept else 0)
        ids, new = previous_ids[:kept], []  # the parts before the last kept cut are the same text
        for start, end in zip([0, *cuts][kept:], [*cuts, len(text)][kept:]):
            if start == end:
                continue  # the text ends at a cut: no empty last part (cuts are at least MIN_CHARS apart)
            part = text[start:end]
            key = text_key(part)
            ids.append(key)
            if key not in self.seen:
                self.seen.add(key)
                new.append((key, part))
        self._last = {episode_id: (text, cuts, ids)}  # one episode at a time: the export reads them in order
        return ids, new
