"""Fuzz the seven games with random and adversarial actions in both modes: nothing may raise.

    python benchmarks/fuzz_games.py [--actions 1000000] [--seed 0] [--games chess,snake]

Every action is one `game.step(text)` on a live episode (episodes are reset on a fresh seed of the
mode's range when they end). The mix: the game's own `sample_action` (about a third), mutations of
sampled actions (characters inserted, deleted, swapped, case flipped, numbers pushed to extremes,
separators changed, wrapped as `Answer: ..., Score: ...`), a list of hand-picked adversarial strings,
random Unicode (control characters, NUL, lone surrogates, right-to-left marks, combining marks,
emoji, CJK), and rarely huge strings (up to 200,000 characters). After every step the result is
checked (types, finite reward, the step counter, feedback for invalid actions); every few hundred
steps also the observation (plain ASCII, equal to the result's), view, render, rules, grammar,
score, and a snapshot/restore round trip. Prints the count, the throughput and the exceptions
(there must be none).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import s3gym_games as games  # noqa: E402
from s3gym_games.base import StepResult  # noqa: E402

ADVERSARIAL = [
    "", " ", "\x00", "\n", "\r\n\t", "END", "END.", "end", " End ", "ENDEND", "END, Score: 1",
    "Answer: END, Score: 0", "💣", "🂡♠️", "\u202e1 2", "\u200b", "\ufeff", "\ud800", "\udfff",
    "\ud83d\ude00", "a" * 1000, "(" * 500, ")" * 500, "[" * 300, "{}", "[]", "null", "None", "nan",
    "inf", "-inf", "1e309", "-0", "0", "-1", "999999999999999999999999", "0x1F", "1_000", "½",
    "٣", "３", "Ⅷ", "1,2", "1, 2", "(1,2)", "(1, 2, 3)", "1 2 3 4 5 6 7 8", "-5 -5", "0 0", "3 90",
    "10 360", "1 45", "uncover (3,4)", "flag(0,0)", "UNCOVER(99,99)", "uncover(-1,-1)",
    "A:(1,2)", "A:(0,0), A:(1,1)", "X 1 1; W 2 2; F 0 0", "P 1 1", "W -1 0", "UP", "down", "LEFT!",
    "collaborate.", "cheat", "COLLABORATE COLLABORATE", "0 1", "1 0", "0 0 0", "0 99", "99 0",
    "Answer: 3 90, Score: 1", "<3 90>", "`3 90`", "**3 90**", "\\boxed{3 90}", '{"action": "3 90"}',
    "'; DROP TABLE steps; --", "[[text:00000000000000000000000000000000]]", "%s%s%n", "{0}{1}",
    "\x1b[31mred\x1b[0m", "\x07\x08\x0b\x0c", "line1\nline2\nAnswer: 1 2", "\t".join("12345"),
]

_UNICODE_POOLS = [
    (0x20, 0x7E),  # printable ASCII
    (0x00, 0x1F),  # control characters (NUL included)
    (0x7F, 0x9F),  # DEL and C1 controls
    (0xA0, 0x24F),  # Latin-1, Latin extended
    (0x300, 0x36F),  # combining marks
    (0x590, 0x6FF),  # Hebrew, Arabic (right-to-left)
    (0x2000, 0x206F),  # general punctuation: zero-width, bidi controls
    (0x4E00, 0x4E80),  # CJK
    (0xD800, 0xDFFF),  # lone surrogates
    (0xFF00, 0xFFEF),  # full-width forms (full-width digits)
    (0x1F300, 0x1F6FF),  # emoji
]


def random_unicode(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        lo, hi = _UNICODE_POOLS[rng.randrange(len(_UNICODE_POOLS))]
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def _extreme_number(rng: random.Random) -> str:
    return rng.choice(["-1", "0", "-0", "99", "100", "1000000", "2147483648", "-2147483649",
                       "18446744073709551616", "1e9", "1.5", "0.0001", "NaN", "1/0", "٣", "７"])


def mutate(text: str, rng: random.Random) -> str:
    """A small random edit of a (usually valid) action."""
    kind = rng.randrange(12)
    if kind == 0 and text:  # delete a character
        i = rng.randrange(len(text))
        return text[:i] + text[i + 1:]
    if kind == 1:  # insert a random character
        i = rng.randrange(len(text) + 1)
        return text[:i] + random_unicode(rng, 1) + text[i:]
    if kind == 2 and len(text) > 1:  # swap two characters
        chars = list(text)
        i, j = rng.randrange(len(chars)), rng.randrange(len(chars))
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    if kind == 3:
        return text.swapcase()
    if kind == 4:  # a number pushed to an extreme
        parts = text.split()
        if parts:
            parts[rng.randrange(len(parts))] = _extreme_number(rng)
        return " ".join(parts)
    if kind == 5:  # separators changed
        return text.replace(" ", rng.choice(["", ",", ", ", "  ", "\t", ";", "\n", "_"]))
    if kind == 6:
        return f"Answer: {text}, Score: {rng.choice(['1', '-1', 'x', '1e400', ''])}"
    if kind == 7:
        return text * rng.randint(2, 5)
    if kind == 8:
        return f"{rng.choice(['(', '[', '<', '`', '*', '“'])}{text}{rng.choice([')', ']', '>', '`', '*', '”'])}"
    if kind == 9:
        return text + rng.choice([".", "..", "!", "?", " please", " END", "\x00", "\n"])
    if kind == 10:
        return text.strip()[: rng.randint(0, max(0, len(text) - 1))]
    return " ".join(reversed(text.split()))


def next_action(game: games.Game, rng: random.Random) -> tuple[str, str]:
    """(kind, action) drawn from the fuzzing mix."""
    r = rng.random()
    if r < 0.34:
        return "sample", game.sample_action(rng)
    if r < 0.70:
        return "mutated", mutate(game.sample_action(rng), rng)
    if r < 0.82:
        return "adversarial", rng.choice(ADVERSARIAL)
    if r < 0.9998:
        return "unicode", random_unicode(rng, rng.randint(0, 40))
    size = rng.choice([10_000, 100_000, 200_000])
    return "huge", rng.choice(["9" * size, "a " * (size // 2), random_unicode(rng, size // 10) * 10,
                               game.sample_action(rng) * (size // 8 + 1)])


@dataclass
class FuzzStats:
    actions: int = 0
    episodes: int = 0
    deep_checks: int = 0
    by_kind: dict = field(default_factory=dict)
    by_game: dict = field(default_factory=dict)
    exceptions: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        return self.actions / self.seconds if self.seconds else 0.0


def _check_step(game: games.Game, result: object, before: int) -> None:
    assert isinstance(result, StepResult), f"step returned {type(result).__name__}"
    assert isinstance(result.observation, str) and isinstance(result.feedback, str)
    assert isinstance(result.reward, float) and math.isfinite(result.reward), f"reward {result.reward!r}"
    assert isinstance(result.terminated, bool) and isinstance(result.truncated, bool)
    assert game.steps == before + 1, "the step counter did not advance"
    if not result.valid:
        assert result.feedback.strip(), "an invalid action got no feedback"
    assert game.steps <= game.max_steps, "the step cap was exceeded"


def _deep_check(game: games.Game, result: StepResult, rng: random.Random) -> None:
    observation = game.observation()
    assert observation == result.observation, "observation() differs from the step result's"
    observation.encode("ascii")
    game.view()
    game.render()
    assert isinstance(game.rules(), str) and isinstance(game.answer_format(), str)
    assert isinstance(game.action_grammar(), str)
    assert math.isfinite(game.score())
    if rng.random() < 0.1:  # snapshot/restore gives the same continuation
        snap = game.snapshot()
        action = game.sample_action(random.Random(1))
        first = game.step(action) if not game.done else None
        game.restore(snap)
        again = game.step(action) if not game.done else None
        assert first == again, "snapshot/restore changed the continuation"


def fuzz_cell(name: str, mode: str, budget: int, rng: random.Random, stats: FuzzStats,
              max_exceptions: int = 20) -> None:
    """`budget` actions on game `name` in `mode`, episodes reset on fresh seeds of the mode's range."""
    seeds = (0, 999_999) if mode == "explore" else (1_000_000, 1_999_999)
    game = None
    done = 0
    while done < budget:
        if game is None or game.done:
            seed = rng.randint(*seeds)
            try:
                game = games.make(name, mode)
                game.reset(seed)
            except Exception as exc:  # noqa: BLE001 - counted, reported
                stats.exceptions.append((name, mode, seed, "<reset>", f"{type(exc).__name__}: {exc}"))
                return
            stats.episodes += 1
        kind, action = next_action(game, rng)
        before = game.steps
        try:
            result = game.step(action)
            _check_step(game, result, before)
            if rng.random() < 0.005:
                _deep_check(game, result, rng)
                stats.deep_checks += 1
        except Exception as exc:  # noqa: BLE001
            where = traceback.extract_tb(exc.__traceback__)[-1]
            stats.exceptions.append((name, mode, game.seed, repr(action[:80]),
                                     f"{type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})"))
            if len(stats.exceptions) >= max_exceptions:
                return
            game = None  # start a clean episode after a failure
        done += 1
        stats.actions += 1
        stats.by_kind[kind] = stats.by_kind.get(kind, 0) + 1
        stats.by_game[name] = stats.by_game.get(name, 0) + 1


def fuzz(budget: int, seed: int = 0, names: list[str] | None = None) -> FuzzStats:
    """Spread `budget` actions over the games and both modes; returns the statistics."""
    names = names or games.names()
    cells = [(n, m) for n in names for m in games.MODES]
    stats = FuzzStats()
    started = time.perf_counter()
    for i, (name, mode) in enumerate(cells):
        share = budget // len(cells) + (1 if i < budget % len(cells) else 0)
        fuzz_cell(name, mode, share, random.Random(f"{seed}/{name}/{mode}"), stats)
    stats.seconds = time.perf_counter() - started
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actions", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--games", default="", help="comma-separated (default: all seven)")
    args = parser.parse_args()
    names = [g.strip() for g in args.games.split(",") if g.strip()] or None
    stats = fuzz(args.actions, args.seed, names)
    from benchmarks._util import print_table

    print_table(f"game fuzzing ({args.actions:,} actions, seed {args.seed})", ["figure", "value"], [
        ["actions", f"{stats.actions:,}"],
        ["episodes", f"{stats.episodes:,}"],
        ["deep checks (observation, view, render, grammar, snapshot)", f"{stats.deep_checks:,}"],
        *[[f"  {k}", f"{v:,}"] for k, v in sorted(stats.by_kind.items())],
        *[[f"  {k}", f"{v:,}"] for k, v in stats.by_game.items()],
        ["actions per second", f"{stats.per_second:,.0f}"],
        ["seconds", f"{stats.seconds:.1f}"],
        ["exceptions", len(stats.exceptions)],
    ])
    for item in stats.exceptions:
        print("EXCEPTION", *item)
    sys.exit(1 if stats.exceptions else 0)


if __name__ == "__main__":
    main()
