"""Pins every game's texts for fixed seeds and action lists, so speed work provably changes nothing.

Each episode's transcript (first observation; per step the action, observation, feedback, reward,
flags, info and the agent-visible view; rules, answer format and action grammar along the way;
the rendered board at both ends; the final score) is hashed and compared with the digest stored in
observation_pins.json, which was written from the code before any optimisation. A changed byte
anywhere fails the test and names the episode. Regenerate (only for a deliberate rule change):

    python tests/games/test_observation_pins.py --write
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import s3gym_games as games  # noqa: E402

PINS = Path(__file__).with_name("observation_pins.json")
SEEDS = {"explore": (0, 3, 11), "eval": (1_000_000, 1_000_004)}
DRIVERS = ("random", "reference", "mixed")
# Odd action texts mixed into the "mixed" driver: each game must treat them exactly as before.
ODD = ("", "   ", "END.", "end", "??", "0", "1 1", "9 9 9", "uncover (0,0)", "flag (8,8)", "UP",
       "collaborate.", "X 0 0; W 1 1", "A:(0,0)", "3 90°", "0 1", "(2, 3)", "cheat", "LEFT ",
       "column 3 rotation 90", "S 0 0;;F 1 1", "unflag(1, 1)", "J 9 9", "1,2")


def _render_text(game) -> str:
    console = Console(file=io.StringIO(), width=100, record=True, color_system=None,
                      force_terminal=False)
    console.print(game.render())
    return console.export_text()


def transcript(name: str, mode: str, seed: int, driver: str) -> str:
    """One episode written out as text: everything an agent, the UI or the verifier reads."""
    game = games.make(name, mode)
    policy = games.reference_policy(name) if driver != "random" else None
    rng = random.Random(seed * 31 + DRIVERS.index(driver))
    parts = [game.reset(seed), game.rules(), game.answer_format(), game.action_grammar(),
             repr(game.view()), _render_text(game)]
    i = 0
    while not game.done:
        if driver == "random":
            action = game.sample_action(rng)
        elif driver == "reference":
            action = policy.act(game.view()).action
        else:
            roll = rng.random()
            action = (rng.choice(ODD) if roll < 0.2 else game.sample_action(rng) if roll < 0.6
                      else policy.act(game.view()).action)
        result = game.step(action)
        parts += [f"> {action!r}", result.observation, result.feedback, repr(result.reward),
                  repr((result.terminated, result.truncated)),
                  json.dumps(dict(result.info), sort_keys=True, default=repr), repr(game.view())]
        if i % 8 == 0:
            parts += [game.action_grammar(), game.observation()]
        i += 1
    parts += [_render_text(game), repr(game.score()), repr(game.steps)]
    return "\n\x1e".join(parts)


def _cases() -> list[tuple[str, str, int, str]]:
    return [(n, m, s, d) for n in games.names() for m in games.MODES for s in SEEDS[m] for d in DRIVERS]


def _key(name: str, mode: str, seed: int, driver: str) -> str:
    return f"{name}/{mode}/{seed}/{driver}"


def digest(case: tuple[str, str, int, str]) -> str:
    return hashlib.sha256(transcript(*case).encode("utf-8")).hexdigest()


@pytest.mark.parametrize("name", games.names())
def test_texts_match_the_pinned_digests(name):
    pins = json.loads(PINS.read_text())
    cases = [c for c in _cases() if c[0] == name]
    assert all(_key(*c) in pins for c in cases), "pins missing: run this file with --write"
    changed = [_key(*c) for c in cases if digest(c) != pins[_key(*c)]]
    assert not changed, f"texts changed for {changed}"


def test_the_pins_can_tell_a_changed_byte():
    """The digest really covers the observation: one changed character gives another digest."""
    case = ("tetris", "eval", 1_000_000, "random")
    text = transcript(*case)
    assert hashlib.sha256(text.encode()).hexdigest() == json.loads(PINS.read_text())[_key(*case)]
    assert hashlib.sha256(text.replace("*", "#", 1).encode()).hexdigest() != digest(case)


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python tests/games/test_observation_pins.py --write")
    PINS.write_text(json.dumps({_key(*c): digest(c) for c in _cases()}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(_cases())} pins to {PINS}")
