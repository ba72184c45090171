"""Plants-vs-Zombies game: place plants with sun to stop zombie waves walking left past column 0."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from rich.console import Group
from rich.text import Text

from s3gym_games.base import Game, Outcome

# letter -> (name, cost, hp); hp 0 = instant (never stays on the board)
PLANTS: dict[str, tuple[str, int, int]] = {
    "X": ("Sunflower", 50, 2),
    "W": ("Peashooter", 100, 2),
    "S": ("Three-Line Shooter", 325, 2),
    "J": ("Wall-nut", 50, 10),
    "H": ("Torch Stump", 125, 2),
    "F": ("Fire Chili", 300, 0),
}
PLANT_ORDER = ("X", "W", "S", "J", "H", "F")
MAX_ZOMBIE_LETTERS = 3  # the terminal shows a count beyond this many zombies in one cell (all listed below)
# letter -> (name, base hp, attack)
ZOMBIES: dict[str, tuple[str, int, int]] = {
    "N": ("normal", 4, 1),
    "R": ("roadblock", 8, 1),
    "B": ("bucket", 12, 1),
    "I": ("high", 6, 3),
}
ZOMBIE_ORDER = ("N", "R", "B", "I")

SUNFLOWER_SUN = 10
TURN_INCOME = 25
START_SUN = 50
SPAWN_EVERY = 5

_PLANT_ALIASES = {
    "x": "X", "sunflower": "X", "sun flower": "X",
    "w": "W", "peashooter": "W", "pea shooter": "W",
    "s": "S", "three-line shooter": "S", "three line shooter": "S", "threeline shooter": "S",
    "three-line": "S", "threepeater": "S", "three-line-shooter": "S",
    "j": "J", "wall-nut": "J", "wallnut": "J", "wall nut": "J",
    "h": "H", "torch stump": "H", "torch-stump": "H", "torchstump": "H", "torch": "H", "torchwood": "H",
    "f": "F", "fire chili": "F", "fire-chili": "F", "chili": "F", "jalapeno": "F",
}
_PASS_WORDS = {"", "none", "pass", "wait", "skip", "nothing", "no placement", "no placements", "-"}
_COORD_RE = re.compile(r"^[rc]?([0-9]{1,4})$", re.IGNORECASE)
_MAX_PARTS = 40
_SEPARATORS_RE = re.compile(r"[(),:@]")

Plants = list  # rows x cols grid of Optional[list[str, int]] ([type, hp])
Zombie = list  # [row, col, type, hp]


@dataclass(frozen=True)
class PvzConfig:
    max_steps: int
    rows: int
    cols: int


@dataclass(frozen=True)
class PvzView:
    turn: int  # turns survived so far = index of the turn about to be played (0-based)
    max_turns: int
    sun: int
    rows: int
    cols: int
    plants: tuple[tuple[int, int, str, int], ...]  # (row, col, type, hp), row-major order
    zombies: tuple[tuple[int, int, str, int], ...]  # (row, col, type, hp), spawn order
    prices: tuple[tuple[str, str, int], ...]  # (letter, name, cost)
    lost: bool


def spawn_plan(turn: int) -> tuple[int, int, tuple[str, ...]]:
    """(zombie count, extra hp, allowed types) of the spawn at the end of `turn` (count 0 if none)."""
    if turn % SPAWN_EVERY != 0:
        return (0, 0, ())
    if turn < 10:
        allowed: tuple[str, ...] = ("N",)
    elif turn < 20:
        allowed = ("N", "R")
    else:
        allowed = ZOMBIE_ORDER
    return (1 + turn // 10, 4 * (turn // 10), allowed)


def shoot(plants: Plants, zombies: list[Zombie], lane: int, col: int) -> Optional[Zombie]:
    """One shot fired from column `col` along row `lane`: hits the nearest zombie at or right of
    `col` (lowest column, earliest spawned on ties) for 1 + (torch stumps at columns col < c <= the
    target's column in that lane). Removes the zombie when its hp drops to 0. Returns the target."""
    target = None
    for z in zombies:
        if z[0] == lane and z[1] >= col and (target is None or z[1] < target[1]):
            target = z
    if target is None:
        return None
    row = plants[lane]
    damage = 1
    for c in range(col + 1, target[1] + 1):
        p = row[c]
        if p is not None and p[0] == "H":
            damage += 1
    target[3] -= damage
    if target[3] <= 0:
        zombies.remove(target)
    return target


def resolve_turn(plants: Plants, zombies: list[Zombie], chili_rows: list[int],
                 events: Optional[list[str]] = None) -> tuple[int, list[Zombie]]:
    """Phases 2-5 of a turn on plain data (mutated in place): chilies fire, sunflowers produce,
    shooters fire, zombies eat or move. Returns (sun produced by sunflowers, the zombies that walked
    past column 0, in spawn order; they are removed from `zombies`). Spawning and the +25 income are the caller's (phases 6-7)."""
    rows = len(plants)
    # 2. chilies
    for r in chili_rows:
        burned = [z for z in zombies if z[0] == r]
        if burned:
            zombies[:] = [z for z in zombies if z[0] != r]
        if events is not None:
            events.append(f"Chili burned {len(burned)} zombie{'s' if len(burned) != 1 else ''} in row {r}")
    # 3. sunflowers
    produced = 0
    for row in plants:
        for p in row:
            if p is not None and p[0] == "X":
                produced += SUNFLOWER_SUN
    # 4. shooters, row-major order; a three-line shooter fires into rows r-1, r, r+1 in that order
    if zombies:
        killed = 0
        for r in range(rows):
            row = plants[r]
            for c, p in enumerate(row):
                if p is None:
                    continue
                kind = p[0]
                if kind == "W":
                    lanes: tuple[int, ...] = (r,)
                elif kind == "S":
                    lanes = tuple(x for x in (r - 1, r, r + 1) if 0 <= x < rows)
                else:
                    continue
                for lane in lanes:
                    hit = shoot(plants, zombies, lane, c)
                    if hit is not None and hit[3] <= 0:
                        killed += 1
        if killed and events is not None:
            events.append(f"Shots killed {killed} zombie{'s' if killed != 1 else ''}")
    # 5. zombies eat or move, all decided from the state at the start of this phase
    breaches: list[Zombie] = []
    bites: dict[tuple[int, int], int] = {}
    movers = []
    for z in zombies:
        if plants[z[0]][z[1]] is not None:
            key = (z[0], z[1])
            bites[key] = bites.get(key, 0) + ZOMBIES[z[2]][2]
        else:
            movers.append(z)
    for (r, c), dmg in sorted(bites.items()):
        p = plants[r][c]
        p[1] -= dmg
        if p[1] <= 0:
            plants[r][c] = None
            if events is not None:
                events.append(f"Zombies ate the {PLANTS[p[0]][0]} at ({r},{c})")
    for z in movers:
        z[1] -= 1
        if z[1] < 0:
            breaches.append(z)
    if breaches:
        zombies[:] = [z for z in zombies if z[1] >= 0]
    return produced, breaches


_PRICES_LINE = "Prices: " + ", ".join(f"{k} {PLANTS[k][0]} {PLANTS[k][1]}" for k in PLANT_ORDER)


@lru_cache(maxsize=None)
def _field_head(cols: int, width: int) -> str:
    """The observation's lines between the turn line and the first field row."""
    return "\n".join([
        _PRICES_LINE,
        f"Field (row r, column c; zombies enter at column {cols - 1} and walk left; "
        "cell = plant+HP, then zombie letters):",
        ("     " + "".join(f"c{c}".ljust(width) for c in range(cols))).rstrip()])


@lru_cache(maxsize=None)
def _grid_format(rows: int, cols: int, width: int) -> str:
    """A format string for the field rows: `r0 | ` then each cell left-justified to `width`
    characters, the last one not padded (cell texts never end in a blank)."""
    cells = ("{:<%d}" % width) * (cols - 1) + "{}"
    return "\n".join(f"r{r} | " + cells for r in range(rows))


class PvzGame(Game[PvzConfig]):
    """Plants-vs-Zombies, turn based. Rows and columns are 0-based; zombies enter at the rightmost
    column and walk left.

    Choices where the spec is silent:
    - Turn t (0-based; the first step plays turn 0) runs: 1 placements in the order written (each
      needs a plant-free cell on the board and enough sun, else it is skipped with feedback; a cell
      holding only zombies may be planted) -> 2 every chili placed this turn removes all zombies
      in its row and is gone (it never occupies its cell) -> 3 each Sunflower alive gives +10 sun
      -> 4 shooters fire -> 5 zombies eat or move -> 6 spawn -> 7 +25 sun. The observation after
      the step shows turn t+1.
    - Shooting: shooters fire in row-major order (rows top to bottom, columns left to right), a
      Three-Line Shooter into rows r-1, r, r+1 (those that exist) in that order. A shot hits the
      nearest zombie at or right of the shooter's column in the shot's row, so zombies standing on
      the shooter's own cell are hit; among zombies in the same cell the earliest spawned is hit.
      Damage is applied at once and a zombie at 0 HP disappears before the next shot.
    - Torch Stump: a shot gets +1 damage for every Torch Stump in the shot's row whose column is
      strictly right of the shooter and at or left of the target (so a zombie eating the torch
      is hit by a lit shot). Several torches stack (+1 each). Three-line shots into a neighbour
      row use the torches of that neighbour row.
    - Zombies: all decisions are taken from the state at the start of phase 5, simultaneously. A
      zombie whose cell holds a plant eats it (the plant loses the zombie's attack in HP; several
      zombies on one cell add up); every other zombie moves one column left, also into a cell that
      holds a plant, where it stops and starts eating on the next turn. So every plant (not only
      the Wall-nut) blocks; the Wall-nut just has 10 HP. A plant reaching 0 HP is removed at once;
      the zombies on its cell move on the following turn. A zombie spawned on a planted rightmost
      cell eats it from the next turn.
    - Losing: a zombie in column 0 with no plant under it moves left, i.e. walks past column 0; the
      game ends at once in that turn (no spawn, no income, no reward for that turn).
    - Spawns (phase 6, on turns 0, 5, 10, ...): for each of the 1 + turn//10 zombies the row is
      drawn first (uniform over rows), then the type (uniform over the allowed types, drawn even
      when only one type is allowed); HP = base HP + 4*(turn//10). They appear in the rightmost
      column.
    - Action: placements `T r c` separated by `;` (T = plant letter or name, case-insensitive;
      `T(r,c)`, `T r,c`, `T (r, c)` also parse). An empty answer or NONE/PASS/WAIT/SKIP places
      nothing. Each malformed, off-board, occupied or unaffordable placement is skipped with
      feedback and the rest still happen; at most 40 parts are read. The step is flagged invalid
      (info valid=False) only when the answer is non-empty and not a single part is a well-formed
      placement (known plant and two integers); the turn is still played in both modes.
    - Reward +1 per turn survived; score = turns survived (max 64).
    """

    name = "pvz"
    title = "Plants-vs-Zombies"
    description = "Spend sun on plants to hold back waves of zombies for as many turns as possible."
    CONFIGS = {
        "explore": PvzConfig(max_steps=64, rows=3, cols=7),
        "eval": PvzConfig(max_steps=64, rows=5, cols=6),
    }

    # ----- state -------------------------------------------------------------------------
    def _setup(self) -> None:
        rows, cols = self.config.rows, self.config.cols
        self.sun = START_SUN
        self.turn = 0
        self.lost = False
        self.breach: Optional[tuple[int, str]] = None
        self.plants: Plants = [[None] * cols for _ in range(rows)]
        self.zombies: list[Zombie] = []

    def _parse_part(self, part: str) -> tuple[Optional[tuple[str, int, int]], str]:
        """(placement or None, error message) for one `;`-separated part."""
        tokens = _SEPARATORS_RE.sub(" ", part).split()
        tokens = [t for t in tokens if t.lower() != "at"]
        if len(tokens) < 3:
            return None, f"{part[:30]!r} is not a placement (use T r c, e.g. W 1 2)"
        m1, m2 = _COORD_RE.match(tokens[-2]), _COORD_RE.match(tokens[-1])
        plant = _PLANT_ALIASES.get(" ".join(tokens[:-2]).lower())
        if plant is None:
            return None, (f"{' '.join(tokens[:-2])[:30]!r} is not a plant "
                          "(X Sunflower, W Peashooter, S Three-Line Shooter, J Wall-nut, H Torch Stump, F Fire Chili)")
        if not (m1 and m2):
            return None, f"{part[:30]!r} needs a row and a column number (use T r c, e.g. W 1 2)"
        return (plant, int(m1.group(1)), int(m2.group(1))), ""

    def _place(self, plant: str, r: int, c: int, chili_rows: list[int]) -> tuple[bool, str]:
        rows, cols = self.config.rows, self.config.cols
        name, cost, hp = PLANTS[plant]
        if not (0 <= r < rows and 0 <= c < cols):
            return False, (f"skipped {plant} {r} {c}: off the board "
                           f"(rows 0-{rows - 1}, columns 0-{cols - 1})")
        existing = self.plants[r][c]
        if existing is not None:
            return False, f"skipped {plant} {r} {c}: the cell already has a {PLANTS[existing[0]][0]}"
        if self.sun < cost:
            return False, f"skipped {plant} {r} {c}: {name} costs {cost} sun, you have {self.sun}"
        self.sun -= cost
        if plant == "F":
            chili_rows.append(r)
        else:
            self.plants[r][c] = [plant, hp]
        return True, f"placed {name} at ({r},{c})"

    def _apply(self, action: str) -> Outcome:
        notes: list[str] = []
        placed = skipped = well_formed = 0
        chili_rows: list[int] = []
        text = action.strip()
        is_pass = text.lower() in _PASS_WORDS
        if not is_pass:
            parts = [p.strip() for p in text.split(";")]
            parts = [p for p in parts if p]
            if len(parts) > _MAX_PARTS:
                notes.append(f"only the first {_MAX_PARTS} placements were read")
                parts = parts[:_MAX_PARTS]
            for part in parts:
                parsed, error = self._parse_part(part)
                if parsed is None:
                    skipped += 1
                    notes.append(f"skipped: {error}")
                    continue
                well_formed += 1
                ok, note = self._place(*parsed, chili_rows)
                placed += ok
                skipped += not ok
                notes.append(note)
        valid = is_pass or well_formed > 0
        events: list[str] = []
        turn = self.turn
        produced, breaches = resolve_turn(self.plants, self.zombies, chili_rows, events)
        breach = breaches[0] if breaches else None
        self.sun += produced
        head = f"Turn {turn}: " + ("; ".join(notes) if notes else "no placements") + "."
        if not valid:
            head = (f"Invalid action: nothing in {text[:40]!r} is a placement (use T r c separated "
                    "by ';', e.g. X 0 0; W 1 0, or NONE). " + head)
        info = {"placed": placed, "skipped": skipped}
        if breach is not None:
            self.lost = True
            self.breach = (breach[0], breach[2])
            events.append(f"A {ZOMBIES[breach[2]][0]} zombie walked past column 0 in row {breach[0]}: "
                          f"you lose after surviving {turn} turns")
            return Outcome(head + " " + ". ".join(events) + ".", 0.0, valid, True, info)
        count, extra, allowed = spawn_plan(turn)
        if count:
            rows, cols = self.config.rows, self.config.cols
            spawned = []
            for _ in range(count):
                r = self.rng.randrange(rows)
                kind = self.rng.choice(allowed)
                self.zombies.append([r, cols - 1, kind, ZOMBIES[kind][1] + extra])
                spawned.append(f"{kind} in row {r}")
            events.append("Spawned " + ", ".join(spawned))
        self.sun += TURN_INCOME
        self.turn = turn + 1
        events.append(f"Survived turn {turn}")
        return Outcome(head + " " + ". ".join(events) + ".", 1.0, valid, False, info)

    # ----- what the agent sees -----------------------------------------------------------
    def view(self) -> PvzView:
        plants = tuple((r, c, p[0], p[1]) for r, row in enumerate(self.plants)
                       for c, p in enumerate(row) if p is not None)
        zombies = tuple((z[0], z[1], z[2], z[3]) for z in self.zombies)
        prices = tuple((k, PLANTS[k][0], PLANTS[k][1]) for k in PLANT_ORDER)
        return PvzView(self.turn, self.max_steps, self.sun, self.config.rows, self.config.cols,
                       plants, zombies, prices, self.lost)

    def _cells(self) -> list[str]:
        """Cell texts in row-major order: plant letter and HP (or `.`), then ` ` and the letters of
        the zombies standing there, in spawn order."""
        cols = self.config.cols
        cells = [f"{p[0]}{p[1]}" if p is not None else "." for row in self.plants for p in row]
        for z in self.zombies:
            i = z[0] * cols + z[1]
            text = cells[i]
            cells[i] = (text + " " + z[2]) if " " not in text else text + z[2]
        return cells

    def observation(self) -> str:
        cells = self._cells()
        cols = self.config.cols
        width = max(6, max(map(len, cells)) + 1)
        lines = [f"Turn: {self.turn} of {self.max_steps}   Sun: {self.sun}", _field_head(cols, width),
                 _grid_format(self.config.rows, cols, width).format(*cells)]
        if self.zombies:
            lines.append("Zombies (row,col type HP): " + "; ".join(
                [f"({z[0]},{z[1]}) {z[2]} {z[3]}" for z in self.zombies]))
        else:
            lines.append("Zombies (row,col type HP): none")
        if self.lost and self.breach is not None:
            lines.append(f"GAME OVER: a zombie walked past column 0 in row {self.breach[0]}.")
        return "\n".join(lines)

    def render(self) -> Group:
        """The observation's information, coloured: turn and sun, the field (plant + HP, then the
        zombie letters of each cell, in fixed-width columns that never wrap), the zombies with their
        HP, and the price list."""
        rows, cols = self.config.rows, self.config.cols
        plant_style = {"X": "bold yellow", "W": "bold green", "S": "bold bright_green",
                       "J": "bold dark_orange3", "H": "bold red", "F": "bold magenta"}
        zombie_style = {"N": "grey70", "R": "bold orange1", "B": "bold steel_blue1", "I": "bold magenta"}
        header = Text(f"Turn {self.turn}/{self.max_steps}   Sun: {self.sun}", style="bold yellow")
        by_cell: dict[tuple[int, int], list[Zombie]] = {}
        for z in self.zombies:
            by_cell.setdefault((z[0], z[1]), []).append(z)
        texts = {}  # (r, c) -> the cell as drawn: plant + HP, then the zombie letters (a count when crowded)
        for r in range(rows):
            for c in range(cols):
                p = self.plants[r][c]
                cell = Text()
                if p is not None:
                    cell.append(f"{p[0]}{p[1]}", style=plant_style[p[0]])
                else:
                    cell.append(".", style="grey42")
                zombies = by_cell.get((r, c), [])
                if len(zombies) > MAX_ZOMBIE_LETTERS:
                    cell.append(f" {len(zombies)}z", style="bold")
                elif zombies:
                    cell.append(" ")
                    for z in zombies:
                        cell.append(z[2], style=zombie_style[z[2]])
                texts[r, c] = cell
        width = max(4, max(t.cell_len for t in texts.values()) + 1)
        field = Text(no_wrap=True, overflow="crop")
        field.append("     " + "".join(f"c{c}".ljust(width) for c in range(cols)).rstrip(), style="dim")
        for r in range(rows):
            field.append(f"\nr{r} | ", style="dim")
            for c in range(cols):
                field.append_text(texts[r, c])
                if c < cols - 1:
                    field.append(" " * (width - texts[r, c].cell_len))
        if self.zombies:
            zombies_line = Text("Zombies (row,col type HP): ", style="bold")
            for k, z in enumerate(self.zombies):
                if k:
                    zombies_line.append("; ")
                zombies_line.append(f"({z[0]},{z[1]}) ")
                zombies_line.append(f"{z[2]} {z[3]}", style=zombie_style[z[2]])
        else:
            zombies_line = Text("Zombies: none", style="dim")
        prices = Text("Prices: ", style="bold")
        for k, key in enumerate(PLANT_ORDER):
            if k:
                prices.append(", ", style="dim")
            prices.append(key, style=plant_style[key])
            prices.append(f" {PLANTS[key][0]} {PLANTS[key][1]}", style="dim")
        parts = [header, field, zombies_line, prices]
        if self.lost and self.breach is not None:
            parts.append(Text(f"GAME OVER: a zombie walked past column 0 in row {self.breach[0]}.",
                              style="bold red"))
        return Group(*parts)

    def rules(self) -> str:
        rows, cols = self.config.rows, self.config.cols
        return (
            f"Plants-vs-Zombies (turn based). The field has {rows} rows (0-{rows - 1}) and {cols} "
            f"columns (0-{cols - 1}). Zombies appear in column {cols - 1} and walk left one column per "
            "turn; you lose as soon as a zombie walks left out of column 0. Survive as many turns as "
            f"possible (at most {self.max_steps}); your score is the number of turns survived.\n"
            f"Sun: you start with {START_SUN}; every turn you get +{TURN_INCOME}, plus +{SUNFLOWER_SUN} "
            "for each living Sunflower.\n"
            "Plants (letter, name, cost, HP, effect): X Sunflower 50, 2 HP, +10 sun per turn; "
            "W Peashooter 100, 2 HP, each turn 1 damage to the nearest zombie in its row at or right of "
            "its own column; S Three-Line Shooter 325, 2 HP, the same shot into its own row and each "
            "neighbouring row; J Wall-nut 50, 10 HP, a sturdy blocker; H Torch Stump 125, 2 HP, every "
            "shot that passes it on the way to its target (torch column right of the shooter and at or "
            "left of the target, in the shot's row) deals +1 damage, several torches add up; F Fire "
            "Chili 300, instant: removes every zombie in its row this turn, then is gone.\n"
            "Zombies (letter, type, HP, attack): N normal 4, 1; R roadblock 8, 1; B bucket 12, 1; "
            "I high 6, 3. A zombie standing on a plant's cell eats it (the plant loses the zombie's "
            "attack in HP per turn, 0 HP removes it); otherwise it moves one column left, also onto "
            "a plant's cell, where it stops and eats from the next turn on. So every plant blocks.\n"
            "Spawns: at the end of turns 0, 5, 10, ... 1 + turn//10 zombies appear in random rows of "
            f"column {cols - 1}, with HP raised by 4*(turn//10); before turn 10 only normal zombies, "
            "before turn 20 normal or roadblock, later any type.\n"
            "Turn order: your placements -> chilies fire -> sunflowers produce -> shooters fire "
            "(nearest target first) -> zombies eat or move -> new zombies spawn -> +25 sun.\n"
            "Action: zero or more placements `T r c` separated by `;` (T = plant letter, r = row, "
            "c = column), or NONE to place nothing. A placement needs a cell without a plant (zombies "
            "may stand there) and enough sun; bad placements are skipped with feedback and the "
            "others still happen. The turn is always played, even for an unreadable answer."
        )

    def answer_format(self) -> str:
        return "T r c; T r c; ...  or NONE   (example: X 0 0; W 1 0)"

    def action_grammar(self) -> str:
        affordable = [k for k in PLANT_ORDER if PLANTS[k][1] <= self.sun]
        empty = [f'"{r} {c}"' for r in range(self.config.rows) for c in range(self.config.cols)
                 if self.plants[r][c] is None]
        if not affordable or not empty or self.done:
            return '"NONE"'
        plant = "(" + " | ".join(f'"{k}"' for k in affordable) + ")"
        cell = "(" + " | ".join(empty) + ")"
        placement = f'{plant} " " {cell}'
        # bounded (at most 3 placements a turn): a tiny model otherwise repeats until its token cap
        return f'"NONE" | {placement} ( "; " {placement} ){{0,2}}'

    def score(self) -> float:
        return float(self.turn)

    def sample_action(self, rng: random.Random) -> str:
        k = rng.choice((0, 1, 1, 1, 2))
        if k == 0:
            return "NONE"
        return "; ".join(f"{rng.choice(PLANT_ORDER)} {rng.randrange(self.config.rows)} "
                         f"{rng.randrange(self.config.cols)}" for _ in range(k))

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        return (0.0, float(min(cls.CONFIGS[mode].max_steps, 64)))

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """+1 for a turn survived, 0 for the turn a zombie breaks through."""
        return (0.0, 1.0)
