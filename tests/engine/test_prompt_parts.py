"""Prompt parts for exports: their concatenation is the prompt exactly, each distinct part is handed out
once, and the cuts depend on the text alone (cutting only what follows the previous prompt's common
prefix gives the same parts as cutting the whole prompt afresh)."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from s3gym_tui.engine.prompt_parts import PromptParts


def _episode(rng: random.Random, steps: int) -> list[str]:
    """The prompts of a History-shaped episode: shared hints, turns growing in the middle, rules after."""
    hints = "".join(f"Env: board {rng.random():.6f}\nLLM: Answer: UP\n" for _ in range(400))
    turns, prompts = [], []
    for i in range(steps):
        user = f"Hint Messages:\n{hints}\nCurrent episode so far:\n{''.join(turns)}Game rules: eat apples.\nState {i}"
        prompts.append(json.dumps([{"role": "user", "content": user}]))
        turns.append(f"Env: step {i} {rng.random():.6f}\n" * rng.randint(1, 30))
    return prompts


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(1, 12))
def test_parts_rebuild_each_prompt_and_match_a_fresh_cut(seed, steps):
    parts, texts = PromptParts(), {}
    for prompt in _episode(random.Random(seed), steps):
        ids, new = parts.split("ep", prompt)
        texts.update(new)
        assert "".join(texts[i] for i in ids) == prompt
        assert PromptParts().split("other", prompt)[0] == ids  # the same cuts without the previous prompt
    assert len(texts) == len(parts.seen)


def test_shared_text_becomes_shared_parts():
    rng = random.Random(1)
    first, second = _episode(rng, 2), _episode(random.Random(1), 2)
    parts = PromptParts()
    a, _ = parts.split("a", first[1])
    b, new = parts.split("b", second[1])  # another episode with the same prompt: nothing new
    assert a == b and new == [] and len(a) > 3
