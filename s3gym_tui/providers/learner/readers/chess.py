"""The hidden-rule board as the learner reads it: each piece's recent moves (wrapped around the board) and
which walls it touches; what a piece did next is learnt from the boards History shows, one per tick."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.evidence import Item
from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader

_SIZE = re.compile(r"Board (\d+)x\d+")
_LABEL = re.compile(r"^t(-\d+|0):$")
_BOARD_ROW = re.compile(r"^\s*(\d+)((?:\s+\S)+)\s*$")
_PIECES = re.compile(r"^Pieces to predict \(\d+\): (.*)$", re.MULTILINE)
STAY = "(0,0)"


def boards(observation: str) -> list[dict[str, tuple[int, int]]]:
    """Each shown board (oldest first) as piece -> (row, col)."""
    out: list[dict[str, tuple[int, int]]] = []
    current: Optional[dict[str, tuple[int, int]]] = None
    header = True
    for line in observation.split("\n"):
        head = line[:4].strip()
        if head[:1] == "t" and line.endswith(":"):
            current, header = {}, True
            out.append(current)
            continue
        if current is None:
            continue
        if header:  # the column numbers under the label
            header = False
            continue
        cells = line.split()
        if not cells or not cells[0].isdigit():
            current = None
            continue
        r = int(cells[0])
        for c, ch in enumerate(cells[1:]):
            if ch != ".":
                current[ch] = (r, c)
    return out


def _wrap(d: int, n: int) -> int:
    d %= n
    return d - n if d > n // 2 else d


def _delta(a: tuple[int, int], b: tuple[int, int], n: int) -> tuple[int, int]:
    return _wrap(b[0] - a[0], n), _wrap(b[1] - a[1], n)


def _walls(p: tuple[int, int], n: int) -> str:
    sides = [s for s, hit in (("top", p[0] <= 1), ("bottom", p[0] >= n - 2), ("left", p[1] <= 1),
                              ("right", p[1] >= n - 2)) if hit]
    return "+".join(sides) or "open"


def _text(d: tuple[int, int]) -> str:
    return f"({d[0]},{d[1]})"


def keys(moves: list[tuple[int, int]], at: tuple[int, int], n: int) -> tuple[str, ...]:
    """Finest first: all moves seen and the walls near, the last four, the last two, the last one."""
    texts = [f"({a},{b})" for a, b in moves]
    out = []
    for k in (len(moves), 4, 2, 1):
        if len(moves) >= k:
            text = " ".join(texts[-k:])
            out.append(f"moved {text} near {_walls(at, n)}" if k == len(moves) and k > 4 else f"moved {text}")
    return tuple(dict.fromkeys(out))


class ChessReader(Reader):
    game = "chess"
    title = "Hidden-rule board"
    observation_start = re.compile(r"^Predictions made: \d+ of \d+")
    predictive = True

    def _size(self, observation: str) -> int:
        m = _SIZE.search(observation)
        return int(m.group(1)) if m else 15

    def decisions(self, observation: str) -> list[Decision]:
        n = self._size(observation)
        shown = boards(observation)
        pieces = _PIECES.search(observation)
        letters = pieces.group(1).split() if pieces else sorted(shown[-1]) if shown else []
        out = []
        for letter in letters:
            path = [b[letter] for b in shown if letter in b]
            if not path:
                continue
            moves = [_delta(a, b, n) for a, b in zip(path, path[1:])]
            here = path[-1]

            def make(label: str, here=here, letter=letter) -> str:
                m = re.match(r"\((-?\d+),(-?\d+)\)", label)
                dr, dc = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
                return f"{letter}:({(here[0] + dr) % n},{(here[1] + dc) % n})"

            out.append(Decision(letter, keys=keys(moves, here, n), prior=STAY, make=make,
                                weight=1.0 / max(1, len(letters))))
        return out

    def compose(self, chosen: list[tuple[Decision, str]]) -> str:
        return ", ".join(part for _, part in chosen) or "END"

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        return None

    def experience(self, before: str, action: str, feedback: str, after: Optional[str],
                   stated: Optional[float], oracle: Optional[float],
                   ref: Optional[str]) -> tuple[Optional[Item], list[Item]]:
        """What each piece did: its move from the board shown at this step to the next step's newest board
        (a prediction's own worth is not needed: the next board shows the truth)."""
        if not after:
            return None, []
        n = self._size(before)
        shown, then = boards(before), boards(after)
        if not shown or not then:
            return None, []
        items = []
        for letter, now in shown[-1].items():
            nxt = then[-1].get(letter)
            path = [b[letter] for b in shown if letter in b]
            if nxt is None or len(path) < 2:
                continue
            moves = [_delta(a, b, n) for a, b in zip(path, path[1:])]
            items.append(Item(keys(moves, now, n), _text(_delta(now, nxt, n)), 1.0 / len(shown[-1]), 1.0, ref))
        return None, items
