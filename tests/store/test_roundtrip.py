"""Every model survives a write and a read unchanged; basic run/episode/step behaviour."""

from __future__ import annotations

import pytest

from s3gym_tui.models import Checkpoint, Run, RunConfig, Step
from s3gym_tui.store import DatasetRow, Store, StoreError


def test_run_round_trip_with_every_config_field(store: Store):
    config = RunConfig(model="openai/gpt-4.1", game="Trust-Evolution", pathway="history",
                       explore_episodes=12, eval_every=4, eval_episodes=2, explore_seed_base=7,
                       eval_seed_base=2_000_000, history_budget=5000, max_tokens=321,
                       temperature=0.7, decoding_seed=42, api_base="http://localhost:8000/v1",
                       step_cap=16, oracle_feedback=True, timeout_s=9.5, max_retries=2)
    run = store.runs.create_run(config, run_id="my-run", note="a note")
    assert run.config.game == "trust"
    assert store.runs.get_run("my-run") == run
    row = store.conn.execute("SELECT game, model, pathway, status FROM runs").fetchone()
    assert row == ("trust", "openai/gpt-4.1", "history", "created")


def test_create_run_generates_ids_and_accepts_a_mapping(store: Store):
    a = store.runs.create_run({"model": "m", "game": "snake"})
    b = store.runs.create_run({"model": "m", "game": "snake"})
    assert a.id != b.id and a.id.startswith("snake-none-")
    with pytest.raises(StoreError, match="already exists"):
        store.runs.create_run({"model": "m", "game": "snake"}, run_id=a.id)
    with pytest.raises(StoreError, match="invalid run config"):
        store.runs.create_run({"model": "m", "game": "snake", "eval_every": 0})


def test_missing_run_message(store: Store):
    with pytest.raises(StoreError, match=r"^no run 'nope'$"):
        store.runs.get_run("nope")


def test_list_runs_newest_first_with_limit(store: Store):
    ids = []
    for i in range(5):
        run = Run(id=f"r{i}", config=RunConfig(model="m", game="chess"),
                  created_at=f"2026-01-0{i + 1}T00:00:00.000+00:00")
        store.runs.create_run(run.config, run_id=run.id)
        store.conn.execute("UPDATE runs SET created_at = ? WHERE id = ?", (run.created_at, run.id))
        ids.append(run.id)
    assert [r.id for r in store.runs.list_runs()] == ids[::-1]
    assert [r.id for r in store.runs.list_runs(limit=2)] == ["r4", "r3"]
    assert [r.id for r in store.runs.list_runs(limit=2, offset=2)] == ["r2", "r1"]


def test_run_status_and_note(store: Store, run: Run):
    assert store.runs.set_run_status(run.id, "running").status == "running"
    assert store.runs.get_run(run.id).status == "running"
    assert store.runs.set_run_note(run.id, "looks good").note == "looks good"
    with pytest.raises(StoreError, match="bad run status"):
        store.runs.set_run_status(run.id, "exploded")
    with pytest.raises(StoreError, match="no run 'x'"):
        store.runs.set_run_status("x", "finished")


def test_episode_round_trip_with_every_field(store: Store, run: Run, explored, make_episode):
    summary = store.summaries.add_summary(run.id, "r", "a", "n", source_episode_ids=[explored[0].id])
    episode = make_episode(run, index=5, seed=5, status="finished", score=12.5, n_steps=0,
                           summary_id=summary.id,
                           history_episode_ids=(explored[1].id, explored[2].id), history_cut=1,
                           fork_of=explored[0].id, fork_step=1,
                           finished_at="2026-11-29T00:00:00.000+00:00")
    store.episodes.add_episode(episode)
    assert store.episodes.get_episode(episode.id) == episode


def test_eval_episode_round_trip(store: Store, run: Run, make_episode):
    episode = make_episode(run, phase="eval", index=2, checkpoint=9)
    store.episodes.add_episode(episode)
    assert store.episodes.get_episode(episode.id) == episode
    assert store.episodes.get_episode(episode.id).checkpoint == 9


def test_run_less_episode(store: Store, make_episode):
    episode = make_episode(None, mode="eval")  # hand-driven play, eval rules on an explore seed
    store.episodes.add_episode(episode)
    assert store.episodes.get_episode(episode.id) == episode


def test_episode_refusals(store: Store, run: Run, make_episode):
    episode = store.episodes.add_episode(make_episode(run))
    with pytest.raises(StoreError, match="already exists"):
        store.episodes.add_episode(episode)
    with pytest.raises(StoreError, match="no run 'ghost'"):
        store.episodes.add_episode(make_episode(None, run_id="ghost"))
    with pytest.raises(StoreError, match="'snake' but run"):
        store.episodes.add_episode(make_episode(run, game="snake"))
    with pytest.raises(StoreError, match="without a checkpoint"):
        store.episodes.add_episode(make_episode(run, phase="eval", checkpoint=None).model_copy(
            update={"checkpoint": None}))
    with pytest.raises(StoreError, match="with checkpoint 3"):
        store.episodes.add_episode(make_episode(run, checkpoint=3))
    with pytest.raises(StoreError, match="unknown history source"):
        store.episodes.add_episode(make_episode(run, history_episode_ids=("nope",)))
    with pytest.raises(StoreError, match="fork source 'nope'"):
        store.episodes.add_episode(make_episode(run, fork_of="nope", fork_step=2))
    with pytest.raises(StoreError, match="no summary 'nope'"):
        store.episodes.add_episode(make_episode(run, summary_id="nope"))
    with pytest.raises(StoreError, match=r"^no episode 'nope'$"):
        store.episodes.get_episode("nope")
    assert store.episodes.find_episode("nope") is None
    assert store.episodes.find_episode(episode.id) == episode
    assert [e.id for e in store.episodes.list()] == [episode.id]


def test_episode_listing_filters(store: Store, run: Run, explored, make_episode):
    late = [store.episodes.add_episode(make_episode(run, phase="eval", index=i, checkpoint=3))
            for i in range(2)]
    early = [store.episodes.add_episode(make_episode(run, phase="eval", index=i, checkpoint=0))
             for i in range(2)]
    other = store.runs.create_run(RunConfig(model="m", game="trust"))
    store.episodes.add_episode(make_episode(other))
    assert store.episodes.list(run.id) == explored + late + early
    assert store.episodes.list(run.id, phase="explore") == explored
    assert store.episodes.list(run.id, phase="eval", checkpoint=0) == early
    assert store.episodes.list(run.id, checkpoint=3) == late
    assert len(store.episodes.list()) == 8
    assert store.episodes.list(run.id, limit=2) == explored[:2]


def test_finish_episode_and_summary_link(store: Store, run: Run, make_episode):
    episode = store.episodes.add_episode(make_episode(run))
    done = store.episodes.finish_episode(episode.id, score=3.0, status="failed")
    assert (done.score, done.status) == (3.0, "failed") and done.finished_at
    with pytest.raises(StoreError, match="bad final status"):
        store.episodes.finish_episode(episode.id, 1.0, status="running")
    with pytest.raises(StoreError, match="no episode 'x'"):
        store.episodes.finish_episode("x", 1.0)
    summary = store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=episode.id)
    assert store.episodes.set_episode_summary(episode.id, summary.id).summary_id == summary.id
    with pytest.raises(StoreError, match="no summary"):
        store.episodes.set_episode_summary(episode.id, "ghost")


def test_step_round_trip_with_every_field(store: Store, run: Run, make_episode):
    episode = store.episodes.add_episode(make_episode(run))
    steps = [
        Step(episode_id=episode.id, index=0, observation="obs\nline 2", prompt='[{"a": 1}]',
             reply="thinking...\nAnswer: D, Score: -1", action="D", self_score=-1.5, reward=0.0,
             feedback="opponent cooperated", valid=True, terminated=False, truncated=False,
             actor="human-edit", proposed_action="C", fault=None, tokens_in=1234,
             tokens_out=56, latency_ms=789.25, cost=0.0012,
             created_at="2026-11-29T12:00:00.000+00:00"),
        Step(episode_id=episode.id, index=1, observation="", prompt="[]", reply="garbage",
             action="", self_score=None, reward=-2.0, feedback="invalid", valid=False,
             terminated=True, truncated=True, actor="human", fault="timeout after 120 s"),
    ]
    for step in steps:  # returned as stored: the prompt in its stored form (store/stored_prompt.py)
        stored = store.episodes.add_step(step)
        assert stored.model_copy(update={"prompt": store.prompts.prompt_of(stored)}) == step
    assert [s.model_copy(update={"prompt": store.prompts.prompt_of(s)}) for s in store.episodes.steps(episode.id)] == steps
    assert store.episodes.steps(episode.id)[1].self_score is None  # missing stays missing, not 0
    assert store.episodes.get_episode(episode.id).n_steps == 2
    assert store.episodes.last_step_index(episode.id) == 1


def test_steps_come_back_in_index_order_and_without_prompts(store: Store, run: Run,
                                                          make_episode, make_step):
    episode = store.episodes.add_episode(make_episode(run))
    for i in (2, 0, 1):
        store.episodes.add_step(make_step(episode.id, i, prompt=f"prompt {i}"))
    assert [s.index for s in store.episodes.steps(episode.id)] == [0, 1, 2]
    light = store.episodes.steps(episode.id, include_prompt=False)
    assert [s.prompt for s in light] == ["", "", ""]
    assert [s.reply for s in light] == [s.reply for s in store.episodes.steps(episode.id)]
    assert store.prompts.step_prompt(episode.id, 2) == "prompt 2"
    with pytest.raises(StoreError, match="no step 7"):
        store.prompts.step_prompt(episode.id, 7)
    assert store.episodes.last_step_index("nothing-here") is None


def test_duplicate_step_refused_and_nothing_changes(store: Store, run: Run, make_episode,
                                                    make_step):
    episode = store.episodes.add_episode(make_episode(run))
    store.episodes.add_step(make_step(episode.id, 0))
    with pytest.raises(StoreError, match=r"step 0 of episode '.*' is already stored"):
        store.episodes.add_step(make_step(episode.id, 0, action="D"))
    # a batch with a duplicate in the middle is all-or-nothing
    with pytest.raises(StoreError, match="step 0"):
        store.episodes.add_steps([make_step(episode.id, 1), make_step(episode.id, 0),
                                  make_step(episode.id, 2)])
    assert [s.action for s in store.episodes.steps(episode.id)] == ["C"]
    assert store.episodes.get_episode(episode.id).n_steps == 1
    assert store.conn.execute("SELECT count(*) FROM steps").fetchone()[0] == 1


def test_step_of_unknown_episode_refused(store: Store, make_step):
    with pytest.raises(StoreError, match="no episode 'ghost'"):
        store.episodes.add_step(make_step("ghost", 0))


def test_add_steps_bumps_each_episode(store: Store, run: Run, make_episode, make_step):
    a = store.episodes.add_episode(make_episode(run, index=0))
    b = store.episodes.add_episode(make_episode(run, index=1))
    assert store.episodes.add_steps([make_step(a.id, 0), make_step(b.id, 0), make_step(a.id, 1)]) == 3
    assert store.episodes.add_steps([]) == 0
    assert (store.episodes.get_episode(a.id).n_steps, store.episodes.get_episode(b.id).n_steps) == (2, 1)


def test_summary_round_trip(store: Store, run: Run, explored):
    summary = store.summaries.add_summary(run.id, "keep cooperating", "do not defect first",
                                          "try tit-for-tat", source_episode_ids=[e.id for e in explored],
                                          author="model:scripted", for_episode_id=explored[-1].id)
    assert store.summaries.get_summary(summary.id) == summary
    assert store.summaries.list(run.id) == [summary]
    assert summary.game == "trust" and summary.version == 1 and summary.status == "active"
    with pytest.raises(StoreError, match="no summary 'x'"):
        store.summaries.get_summary("x")


def test_checkpoint_round_trip_and_refusals(store: Store, run: Run, explored, evaluated):
    cp = Checkpoint(run_id=run.id, x=0, episode_ids=tuple(e.id for e in evaluated),
                    scores=(10.0, 11.0))
    assert store.checkpoints.add_checkpoint(cp) == cp
    assert store.checkpoints.list(run.id) == [cp]
    assert store.checkpoints.list(run.id)[0].mean == 10.5
    with pytest.raises(StoreError, match="already exists"):
        store.checkpoints.add_checkpoint(cp)
    better = cp.model_copy(update={"scores": (12.0, 13.0)})
    store.checkpoints.add_checkpoint(better, replace=True)
    assert store.checkpoints.list(run.id) == [better]
    with pytest.raises(StoreError, match="not an evaluation episode"):
        store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=3, episode_ids=(explored[0].id,),
                                                    scores=(1.0,)))
    with pytest.raises(StoreError, match="no episode 'ghost'"):
        store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=3, episode_ids=("ghost",),
                                                    scores=(1.0,)))
    with pytest.raises(StoreError, match="no run 'ghost'"):
        store.checkpoints.add_checkpoint(Checkpoint(run_id="ghost", x=0, episode_ids=(), scores=()))


def test_dataset_round_trip(store: Store, run: Run, explored):
    rows = [
        DatasetRow(episode_id=explored[0].id, step_index=0, kind="kept",
                   messages=({"role": "user", "content": "play"},
                             {"role": "assistant", "content": "Answer: C, Score: 1"})),
        {"episode_id": explored[0].id, "step_index": 1, "kind": "dropped"},
        DatasetRow(episode_id=explored[1].id, step_index=0, kind="corrected",
                   messages=({"role": "user", "content": "x"},
                             {"role": "assistant", "content": "Answer: D, Score: 0"})),
    ]
    dataset = store.datasets.add_dataset(run.id, {"threshold": 0.5, "correction": None}, rows)
    assert dataset.counts == {"kept": 1, "corrected": 1, "dropped": 1}
    assert store.datasets.get_dataset(dataset.id) == dataset
    assert store.datasets.list(run.id) == [dataset] == store.datasets.list()
    back = store.datasets.dataset_rows(dataset.id)
    assert back[0] == rows[0] and back[1].kind == "dropped" and back[1].messages == ()
    assert [r.kind for r in store.datasets.dataset_rows(dataset.id, kind="corrected")] == ["corrected"]


def test_dataset_refusals_store_nothing(store: Store, run: Run, explored):
    with pytest.raises(StoreError, match="no step 9"):
        store.datasets.add_dataset(run.id, {}, [{"episode_id": explored[0].id, "step_index": 9,
                                                 "kind": "kept"}])
    with pytest.raises(StoreError, match="duplicate"):
        store.datasets.add_dataset(run.id, {}, [{"episode_id": explored[0].id, "step_index": 0,
                                                 "kind": "kept"}] * 2)
    with pytest.raises(StoreError, match="invalid dataset row"):
        store.datasets.add_dataset(run.id, {}, [{"episode_id": explored[0].id, "step_index": 0,
                                                 "kind": "maybe"}])
    with pytest.raises(StoreError, match="unknown training row episode 'ghost'"):
        store.datasets.add_dataset(run.id, {}, [{"episode_id": "ghost", "step_index": 0, "kind": "kept"}])
    assert store.datasets.list() == []
    assert store.conn.execute("SELECT count(*) FROM dataset_rows").fetchone()[0] == 0


def test_step_and_n_steps_are_one_transaction(store: Store, run: Run, make_episode, make_step):
    """If bumping n_steps fails, the step is not stored either."""
    episode = store.episodes.add_episode(make_episode(run))
    store.conn.execute("CREATE TEMP TRIGGER refuse_bump BEFORE UPDATE OF n_steps ON episodes "
                       "BEGIN SELECT RAISE(ABORT, 'bump refused'); END")
    with pytest.raises(StoreError, match="bump refused"):
        store.episodes.add_step(make_step(episode.id, 0))
    store.conn.execute("DROP TRIGGER refuse_bump")
    assert store.episodes.steps(episode.id) == [] and store.episodes.get_episode(episode.id).n_steps == 0
    store.episodes.add_step(make_step(episode.id, 0))
    assert store.episodes.get_episode(episode.id).n_steps == 1
