"""Building SFT datasets from hand-made steps: threshold, corrections, drops, counts, precision and
recall, and the held-out line (no evaluation step ever enters, even when asked for)."""

from __future__ import annotations

import json

import pytest

import s3gym_games as games
from s3gym_tui.store import DatasetRow, LeakageError, StoreError, audit
from s3gym_tui.training.dataset import (REFERENCE, build_dataset, parse_correction, reference_reply,
                                        selection_quality, training_examples)
from train_helpers import add_trust_episode, trust_run

# self-scores 2, 1, 0, -1, missing; verifier rewards forced to 2, 0, 3, -1, 2
SPECS = [("collaborate", 2.0, 2.0), ("collaborate", 1.0, 0.0), ("cheat", 0.0, 3.0),
         ("collaborate", -1.0, -1.0), ("cheat", None, 2.0)]


def kinds(store, dataset_id):
    return [(r.step_index, r.kind) for r in store.datasets.dataset_rows(dataset_id)]


async def test_threshold_keeps_positive_self_scores_and_drops_the_rest(store):
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS)
    build = await build_dataset(store, run.id, threshold=0.0)
    assert kinds(store, build.dataset.id) == [(0, "kept"), (1, "kept"), (2, "dropped"), (3, "dropped"),
                                              (4, "dropped")]
    assert build.dataset.counts == {"kept": 2, "corrected": 0, "dropped": 3}
    rule = build.dataset.rule
    assert rule["threshold"] == 0.0 and rule["correction"] is None and rule["select"] == "self_score > threshold"
    assert rule["dropped_reasons"] == {"self-score at or below the threshold": 3}
    # a kept row is the prompt exactly as sent, then the reply exactly as given
    row = store.datasets.dataset_rows(build.dataset.id, kind="kept")[0]
    assert list(row.messages[:-1]) == json.loads(store.prompts.step_prompt(episode.id, 0))
    assert row.messages[-1] == {"role": "assistant", "content": store.episodes.steps(episode.id)[0].reply}
    assert all(r.messages == () for r in store.datasets.dataset_rows(build.dataset.id, kind="dropped"))


@pytest.mark.parametrize("threshold, kept", [(-5.0, [0, 1, 2, 3]), (0.5, [0, 1]), (1.0, [0]), (2.0, [])])
async def test_threshold_is_strict_and_a_missing_score_never_passes(store, threshold, kept):
    run = trust_run(store)
    add_trust_episode(store, run, SPECS)
    build = await build_dataset(store, run.id, threshold=threshold)
    assert [i for i, k in kinds(store, build.dataset.id) if k == "kept"] == kept


async def test_precision_and_recall_against_the_verifier(store):
    run = trust_run(store)
    add_trust_episode(store, run, SPECS)
    build = await build_dataset(store, run.id, threshold=0.0)
    q = build.quality
    # kept: steps 0 (r=2) and 1 (r=0) -> precision 1/2; positives r>0: steps 0, 2, 4 -> recall 1/3
    assert (q.steps, q.kept, q.dropped, q.kept_positive, q.positives) == (5, 2, 3, 1, 3)
    assert q.precision == pytest.approx(0.5) and q.recall == pytest.approx(1 / 3)
    assert selection_quality(store, build.dataset.id) == q


async def test_reference_corrections_replay_the_state_the_agent_saw(store):
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS, seed=7)
    build = await build_dataset(store, run.id, threshold=0.0, correction="reference")
    assert kinds(store, build.dataset.id) == [(0, "kept"), (1, "kept"), (2, "corrected"), (3, "corrected"),
                                              (4, "corrected")]
    assert build.dataset.counts == {"kept": 2, "corrected": 3, "dropped": 0}
    actions = [a for a, _, _ in SPECS]
    for row in store.datasets.dataset_rows(build.dataset.id, kind="corrected"):
        env = games.game_class("trust").replay("explore", 7, actions[:row.step_index])
        move = games.reference_policy("trust").act(env.view())
        assert row.messages[-1]["content"] == f"Answer: {move.action}, Score: {move.expected_reward:g}"
        assert list(row.messages[:-1]) == json.loads(store.prompts.step_prompt(episode.id, row.step_index))
    assert build.quality.precision == pytest.approx(0.5)  # corrections do not count as kept


async def test_another_model_as_correction_source(store):
    run = trust_run(store, model="local/smollm2-135m")
    add_trust_episode(store, run, SPECS)
    build = await build_dataset(store, run.id, threshold=0.0, correction="scripted/trust")
    assert build.dataset.rule["correction"] == "scripted/trust"
    corrected = store.datasets.dataset_rows(build.dataset.id, kind="corrected")
    assert [r.step_index for r in corrected] == [2, 3, 4]
    assert all(r.messages[-1]["content"].startswith("Reference policy move.\nAnswer: ") for r in corrected)


async def test_steps_without_a_prompt_or_not_the_models_own_are_never_kept(store):
    run = trust_run(store)
    add_trust_episode(store, run, [("collaborate", 2.0, 2.0), ("cheat", 3.0, 3.0), ("cheat", 1.0, 0.0)],
                      actors=["model", "human-edit", "human"], no_prompt=[2])
    build = await build_dataset(store, run.id, threshold=0.0)
    assert kinds(store, build.dataset.id) == [(0, "kept"), (1, "dropped"), (2, "dropped")]
    assert build.dataset.rule["dropped_reasons"] == {
        "not the model's own action": 1, "no prompt (a human action typed without a proposal)": 1}
    # with a correction the human-edited step (it has a prompt) is corrected; the prompt-less one is not
    build = await build_dataset(store, run.id, threshold=0.0, correction=REFERENCE)
    assert kinds(store, build.dataset.id) == [(0, "kept"), (1, "corrected"), (2, "dropped")]


async def test_max_examples_stops_the_scan(store):
    run = trust_run(store)
    add_trust_episode(store, run, SPECS, index=0)
    add_trust_episode(store, run, SPECS, index=1)
    build = await build_dataset(store, run.id, threshold=0.0, correction=REFERENCE, max_examples=3)
    assert build.dataset.counts == {"kept": 2, "corrected": 1, "dropped": 0}
    assert build.quality.steps == 3


async def test_evaluation_steps_never_enter_even_when_asked_for(store):
    run = trust_run(store)
    explore = add_trust_episode(store, run, SPECS, index=0)
    evaluation = add_trust_episode(store, run, [("collaborate", 5.0, 2.0)] * 4, phase="eval")
    build = await build_dataset(store, run.id, threshold=-100.0, correction=REFERENCE)
    rows = store.datasets.dataset_rows(build.dataset.id)
    assert {r.episode_id for r in rows} == {explore.id}
    assert build.excluded_eval_steps == 4 and build.dataset.rule["excluded_eval_steps"] == 4
    with pytest.raises(LeakageError, match="evaluation"):
        await build_dataset(store, run.id, episode_ids=[explore.id, evaluation.id])
    with pytest.raises(StoreError):
        await build_dataset(store, run.id, episode_ids=["no-such-episode"])
    # the store refuses an evaluation row written around the builder, and the audit stays clean
    with pytest.raises(LeakageError):
        store.datasets.add_dataset(run.id, {"rule": "by hand"}, [DatasetRow(episode_id=evaluation.id, step_index=0,
                                                                            kind="kept")])
    assert audit(store).ok
    assert all(e["prompt"][0]["role"] == "system" for e in training_examples(store, build.dataset.id))


async def test_only_explicitly_listed_exploration_episodes(store):
    run = trust_run(store)
    first = add_trust_episode(store, run, SPECS, index=0)
    add_trust_episode(store, run, SPECS, index=1)
    build = await build_dataset(store, run.id, episode_ids=[first.id])
    assert {r.episode_id for r in store.datasets.dataset_rows(build.dataset.id)} == {first.id}
    assert build.dataset.rule["episodes"] == 1


def test_reference_reply_is_none_once_the_game_is_over():
    from s3gym_tui.models import Episode

    episode = Episode(id="e", run_id=None, game="trust", mode="explore", phase="explore", seed=0, index=0,
                      model="m", pathway="none")
    assert reference_reply(episode, ["collaborate"] * 10) is None
    assert reference_reply(episode, []).startswith("Answer: ")


@pytest.mark.parametrize("text, expected", [(None, None), ("", None), ("none", None), ("NONE", None),
                                            ("reference", REFERENCE), ("Reference", REFERENCE),
                                            ("openai/gpt-4.1", "openai/gpt-4.1")])
def test_parse_correction(text, expected):
    assert parse_correction(text) == expected
