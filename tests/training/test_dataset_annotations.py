"""A person's annotations steer a dataset: labelled steps left out, corrected actions used as targets
(checked by replaying the game), counted in the rule; and they round-trip through `s3gym export`."""

from __future__ import annotations

import io
import json

from s3gym_tui.engine.export import export_run
from s3gym_tui.training.dataset import build_dataset, training_examples
from train_helpers import add_trust_episode, trust_run

SPECS = [("collaborate", 2.0, 2.0), ("collaborate", 1.0, 0.0), ("cheat", 0.0, 3.0), ("cheat", 1.0, -1.0)]


def kinds(store, dataset_id):
    return [(r.step_index, r.kind, r.reason) for r in store.datasets.dataset_rows(dataset_id)]


async def test_labelled_steps_are_left_out_and_counted(store):
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS)
    store.annotations.add_annotation("step", "leak?", author="human:ann", episode_id=episode.id, step_index=0)
    store.annotations.add_annotation("step", "lucky", author="human:ann", episode_id=episode.id, step_index=1)
    build = await build_dataset(store, run.id, threshold=0.0, exclude_labels=("leak?",))
    assert kinds(store, build.dataset.id)[:2] == [(0, "dropped", "labelled leak? (excluded)"), (1, "kept", None)]
    assert build.annotations.labelled_excluded == 1 and build.dataset.rule["labelled_excluded"] == 1
    everything = await build_dataset(store, run.id, threshold=0.0, exclude_labels=("any",))
    assert [k for _, k, _ in kinds(store, everything.dataset.id)[:2]] == ["dropped", "dropped"]
    plain = await build_dataset(store, run.id, threshold=0.0)
    assert kinds(store, plain.dataset.id)[0][1] == "kept" and plain.annotations.labelled_excluded == 0


async def test_a_persons_corrected_action_becomes_the_target(store):
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS)
    store.annotations.add_annotation("step", "mistake", author="human:ann", episode_id=episode.id, step_index=3,
                                     correction="collaborate")
    store.annotations.add_annotation("step", "mistake", author="human:ann", episode_id=episode.id, step_index=2,
                                     correction="fly away")  # not an action of the game
    build = await build_dataset(store, run.id, threshold=0.0, exclude_labels=("mistake",), annotated_corrections=True)
    rows = {r.step_index: r for r in store.datasets.dataset_rows(build.dataset.id)}
    # the target's score is the self-score the agent stated at that step (1), never a reward the
    # game would give the corrected action: only the self-judged score may shape training data
    assert rows[3].kind == "corrected" and rows[3].messages[-1]["content"] == "Answer: collaborate, Score: 1"
    assert rows[2].kind == "dropped" and "does not accept" in (rows[2].reason or "")
    assert (build.annotations.corrections_used, build.annotations.corrections_refused) == (1, 1)
    assert build.dataset.rule["human_corrections"] == 1
    targets = [e["completion"][0]["content"] for e in training_examples(store, build.dataset.id)]
    assert any(t.startswith("Answer: collaborate") for t in targets)
    without = await build_dataset(store, run.id, threshold=0.0)
    assert {r.step_index: r.kind for r in store.datasets.dataset_rows(without.dataset.id)}[3] == "kept"


def test_annotations_round_trip_through_export(store):
    run = trust_run(store)
    episode = add_trust_episode(store, run, SPECS)
    summary = store.summaries.add_summary(run.id, "r", "a", "n")
    made = [store.annotations.add_annotation("step", "mistake", author="human:ann", note="went \x1b]0;x\x07 left",
                                             episode_id=episode.id, step_index=1, correction="cheat"),
            store.annotations.add_annotation("episode", "lucky", author="human:ann", episode_id=episode.id),
            store.annotations.add_annotation("summary", "insight", author="human:bob", summary_id=summary.id)]
    out = io.StringIO()
    export_run(store, run, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    exported = [line for line in lines if line["type"] == "annotation"]
    assert [(a["id"], a["target"], a["label"], a["note"], a["correction"], a["author"]) for a in exported] == [
        (a.id, a.target, a.label, a.note, a.correction, a.author) for a in made]
    assert "\x1b" not in out.getvalue()  # written as \u001b: the same value, nothing raw on a terminal


def test_s3gym_dataset_says_how_many_annotations_it_used(tmp_path, capsys, tiny_base):
    from s3gym_tui.cli import main
    from s3gym_tui.store import Store

    db = tmp_path / "d.db"
    with Store(db) as store:
        run = trust_run(store)
        episode = add_trust_episode(store, run, SPECS)
        store.annotations.add_annotation("step", "leak?", author="human:ann", episode_id=episode.id, step_index=0)
        store.annotations.add_annotation("step", "mistake", author="human:ann", episode_id=episode.id, step_index=3,
                                         correction="collaborate")
    code = main(["dataset", run.id, "-o", str(tmp_path / "out"), "--base", str(tiny_base), "--exclude-label", "leak?",
                 "--corrections", "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "1 labelled step(s) left out (leak?)" in out.out and "1 corrected action(s) used" in out.out
    assert "wrote 2 examples" in out.out  # step 1 kept (s > 0), step 3 corrected; 0 left out, 2 at s = 0
