"""The block index a prompt is diffed against is derived from the previous prompt's: the same index
as one built from scratch, so the same delta, however the prompts of an episode change."""

from __future__ import annotations

import random

import pytest

from s3gym_tui.store import block_index, prompt_delta


def _episode(rng: random.Random, steps: int) -> list[str]:
    """Prompts that grow, change in the middle, shrink and restart, as an episode's (and forks') do."""
    words = ["board ", ".*..*.\n", "Answer: left, Score: 1\n", "é", "x" * 33, "\"quoted\"", "rules " * 9]
    text = "".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
    prompts = [text]
    for _ in range(steps):
        kind = rng.random()
        if kind < 0.6:  # a turn appended
            text = text + "".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        elif kind < 0.8:  # something in the middle changes
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(words) + text[at + rng.randint(0, 40):]
        elif kind < 0.9:  # cut
            text = text[:rng.randint(0, len(text))]
        else:  # a different prompt
            text = "".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        prompts.append(text)
    return prompts


@pytest.mark.parametrize("seed", range(6))
def test_a_derived_index_is_the_index_built_from_scratch_and_diffs_are_unchanged(seed):
    rng = random.Random(seed)
    block_index.clear()
    prompts = _episode(rng, 80)
    for previous, text in zip(prompts, prompts[1:]):
        ops = prompt_delta.diff(text, previous)  # from the index kept by the previous diff (after the first)
        assert prompt_delta.apply(ops, previous, lambda s: s) == text
        kept = block_index.take(text)  # what this diff kept for the next prompt
        assert kept == block_index.build(text) and list(kept.values()) == sorted(kept.values())
        assert prompt_delta.diff(text, previous) == ops  # `previous` was taken: built from scratch, same ops

def test_an_index_is_kept_for_the_very_text_only_and_within_its_budget(monkeypatch):
    block_index.clear()
    text = "abc" * 100
    prompt_delta.diff(text, "abc" * 90)
    assert block_index.take("".join(["abc"] * 100)) == block_index.build(text)  # an equal text, not this one: built
    assert block_index.take(text) is not block_index.take(text)  # taken once: the second is built again
    monkeypatch.setattr(block_index._recent, "max_chars", 1000)
    texts = [f"{i:04d}" * 200 for i in range(5)]  # 800 characters each
    for t in texts:
        block_index.keep(t, "", {}, 0)
    assert [e[0] for e in block_index._recent.values()] == [texts[-1]]  # the oldest dropped
    block_index.clear()
