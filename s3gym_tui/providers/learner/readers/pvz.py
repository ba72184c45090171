"""Plants-vs-Zombies as the learner reads it: for a placement, the row's nearest zombie and defence; a turn
judged by survival and by how the danger on the field changed (zombies' HP, weighted by how close they are)."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader

_TURN = re.compile(r"Turn: (\d+) of \d+\s+Sun: (\d+)")
_HEAD = re.compile(r"^\s+c0\s")
_ROW = re.compile(r"^r(\d+) \|")
_ZOMBIE = re.compile(r"\((\d+),(\d+)\) ([NRBI]) (\d+)")
PRICES = {"X": 50, "W": 100, "S": 325, "J": 50, "H": 125, "F": 300}
SHOOTERS = {"W", "S"}
DANGER = 0.2  # utility lost per unit of danger added


def field(observation: str) -> tuple[list[list[str]], list[tuple[int, int, str, int]], int]:
    """(plants by row and column ('' for none), zombies (row, col, type, HP), sun)."""
    lines = observation.split("\n")
    head = next((l for l in lines if _HEAD.match(l)), None)
    plants: list[list[str]] = []
    if head is not None:
        starts = [m.start() for m in re.finditer(r"c\d+", head)]
        for line in lines:
            if _ROW.match(line):
                cells = [line[a:b].strip() if b else line[a:].strip()
                         for a, b in zip(starts, starts[1:] + [None])]
                plants.append([c[0] if c[:1] in PRICES and c[1:2].isdigit() else "" for c in cells])
    zombies_line = next((l for l in lines if l.startswith("Zombies")), "")
    zombies = [(int(r), int(c), t, int(hp)) for r, c, t, hp in _ZOMBIE.findall(zombies_line)]
    turn = _TURN.search(observation)
    return plants, zombies, int(turn.group(2)) if turn else 0


def danger(observation: Optional[str]) -> float:
    if not observation:
        return 0.0
    plants, zombies, _ = field(observation)
    return sum(hp / (1 + col) for _, col, _, hp in zombies)


def _row_view(plants: list[list[str]], zombies, row: int, col: int) -> tuple[str, str]:
    ahead = [c for r, c, _, _ in zombies if r == row and c >= col]
    in_row = [c for r, c, _, _ in zombies if r == row]
    near = min(ahead, default=None)
    distance = "none" if near is None else ("here" if near == col else f"{min(near - col, 4)} ahead")
    shooters = sum(1 for p in plants[row] if p in SHOOTERS) if row < len(plants) else 0
    blockers = sum(1 for p in plants[row] if p == "J") if row < len(plants) else 0
    fine = f"zombie {distance}, {shooters} shooters, {blockers} walls"
    coarse = "zombie in row" if in_row else "quiet row"
    return fine, coarse + (", defended" if shooters else ", undefended")


class PvzReader(Reader):
    game = "pvz"
    title = "Plants-vs-Zombies"
    observation_start = re.compile(r"^Turn: \d+ of \d+")
    discount = 0.5
    prior_reward = 1.0  # a turn survived earns 1

    def decisions(self, observation: str) -> list[Decision]:
        plants, zombies, sun = field(observation)
        rows = len(plants)
        worst = max(range(rows), key=lambda r: sum(hp / (1 + c) for zr, c, _, hp in zombies if zr == r),
                    default=0)
        fine, coarse = _row_view(plants, zombies, worst, 0) if rows else ("", "")
        options = [Option("nothing", (f"nothing; worst row: {fine}; sun {min(sun // 50, 6) * 50}+",
                                      f"nothing; worst row: {coarse}", "nothing"), "NONE")]
        for letter, price in PRICES.items():
            if price > sun:
                continue
            for r in range(rows):
                for c in range(len(plants[r])):
                    if plants[r][c]:
                        continue
                    row_fine, row_coarse = _row_view(plants, zombies, r, c)
                    options.append(Option(letter, (f"{letter} at column {c}; {row_fine}",
                                                   f"{letter}; {row_coarse}", letter), f"{letter} {r} {c}"))
        return [Decision(options=tuple(options))]

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        text = feedback or ""
        if "you lose" in text or "GAME OVER" in text:
            return Judged(0.0, -2.0)
        if "Survived turn" not in text:
            return None
        skipped = -0.5 if "skipped" in text else 0.0  # a placement that could not be made
        # every turn survived earns 1, whatever was done: the choice is judged by the danger it left
        return Judged(1.0, skipped - DANGER * (danger(after) - danger(before)))
