"""Sweeps: the plan and its figures, the per-model concurrency limit, rate-limit backoff, the
budget stop, resuming a half-done sweep as a whole, a failing model, and the CLI around them."""

from __future__ import annotations

import asyncio
import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.sweep import SweepRunEvent, SweepRunner
from s3gym_tui.engine.estimate import estimate_run, price
from s3gym_tui.engine.sweep_plan import plan
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store

from tests.engine.helpers import check_run_consistency, trajectory
from tests.fake_openai import FakeOpenAI

TINY = {"explore_episodes": 2, "eval_every": 2, "eval_episodes": 1}
PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
TINY_FLAGS = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def run_sweep(store: Store, config: SweepConfig, on_event=None):
    stored, runs = store.sweeps.create_sweep(config)
    runner = SweepRunner(store, stored, backoff_base_s=0)
    if on_event is not None:
        runner.on_event = on_event
    return asyncio.run(runner.run()), runner


# ----- the plan -------------------------------------------------------------------------------
def test_the_plan_counts_the_calls_a_sweep_makes_and_prices_known_models(tmp_path):
    """Trust (10 rounds) and Chess (5 steps) always play to their caps with the scripted players:
    the plan's call count is then exact, summaries included."""
    config = SweepConfig(games=("trust", "chess"), pathways=("none", "history", "summary"),
                         models=("scripted",), settings=TINY)
    planned = plan(config.run_configs())
    assert [e.config.model for e in planned.runs] == ["scripted/trust"] * 3 + ["scripted/chess"] * 3
    # explore 2 x cap + 2 checkpoints x 1 x cap (+ 2 summaries on the summary pathway)
    assert [e.calls for e in planned.runs] == [40, 40, 42, 20, 20, 22]
    store = Store(tmp_path / "p.db")
    final, _ = run_sweep(store, config)
    assert final.status == "finished"
    usage = store.sweeps.sweep_usage(final.id)
    assert usage["calls"] == planned.calls == 184
    assert usage["tokens_in"] <= planned.tokens_in * 1.25  # an upper bound, close for capped games
    assert usage["tokens_in"] >= planned.tokens_in * 0.75
    assert usage["cost"] == 0 and planned.cost_max == 0 and not planned.unpriced
    history = next(e for e in planned.runs if e.config.pathway == "history")
    none = next(e for e in planned.runs if e.config.pathway == "none")
    assert history.input_tokens > none.input_tokens  # previous episodes ride along


def test_the_plan_prices_with_litellm_and_says_which_models_it_cannot():
    config = SweepConfig(games=("trust",), pathways=("none",), models=("openai/gpt-4o-mini", "hosted_vllm/mine"),
                         settings=TINY)
    planned = plan(config.run_configs())
    gpt, mine = planned.models
    assert gpt.cost_max == pytest.approx(price("openai/gpt-4o-mini", gpt.tokens_in, gpt.tokens_out))
    assert gpt.cost_max > gpt.cost_typical > 0
    assert gpt.tokens_out == gpt.calls * 14_000
    assert mine.cost_max is None and planned.unpriced == ["hosted_vllm/mine"]


def test_the_plan_makes_each_distinct_prompt_once_and_counts_each_part_once_per_model(monkeypatch):
    """21 runs (7 model names x 3 pathways of one game): the game's first prompt and turn are made
    once per (mode, seed), not once per run, and each distinct text is counted once per model."""
    import s3gym_games as games
    from s3gym_tui.engine import estimate, tokens

    made, counted = [], []
    real_policy, real_count = games.reference_policy, tokens._count
    monkeypatch.setattr(games, "reference_policy", lambda name: made.append(name) or real_policy(name))
    monkeypatch.setattr(tokens, "_count", lambda model, text: counted.append((model, text)) or real_count(model, text))
    estimate._texts.cache_clear()
    estimate._summary_parts.cache_clear()
    tokens._CACHE.clear()
    models = tuple(f"hosted_vllm/m{i}" for i in range(7))
    config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=models,
                         settings={**TINY, "explore_episodes": 6, "eval_every": 3, "eval_episodes": 3})
    planned = plan(config.run_configs())
    assert len(planned.runs) == 21 and planned.calls > 0
    assert made == ["trust"] * 4  # the first move of the three exploration seeds and the evaluation seed
    assert len(counted) == len(set(counted))  # no text counted twice for a model
    assert {model for model, _ in counted} == set(models)
    estimate._texts.cache_clear()
    again = plan(config.run_configs())
    assert again == planned  # the same figures whether or not the parts were made before


def test_estimates_grow_with_the_history_budget():
    small, big = (estimate_run(SweepConfig(games=("snake",), pathways=("history",), models=("scripted",),
                                           settings={**TINY, "explore_episodes": 6, "history_budget": b}
                                           ).run_configs()[0]) for b in (1_000, 100_000))
    assert small.calls == big.calls and small.input_tokens < big.input_tokens


def test_the_plan_is_printed_and_nothing_is_stored_without_yes(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "plan.db")
    code, out, _ = run_cli(capsys, "sweep", "--games", "trust", "--models", "scripted", *TINY_FLAGS,
                           "--plan", "--db", db)
    assert code == 0 and "3 runs" in out and "calls" in out and "nothing was stored" in out
    assert "scripted/trust" in out and "$0.00" in out
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, _, err = run_cli(capsys, "sweep", "--games", "trust", "--models", "scripted", *TINY_FLAGS, "--db", db)
    assert code == 2 and "pass --yes" in err
    with Store(db) as store:
        assert store.sweeps.list_sweeps() == [] and store.runs.list_runs() == []


@pytest.mark.parametrize("args,needle", [
    (["--models", "scripted/trust", "--games", "all"], "scripted/trust plays only trust"),
    (["--models", "scripted", "--games", "go"], "unknown game 'go'"),
    (["--models", "scripted", "--pathways", "none,trained"], "started with `s3gym train`"),
    (["--models", "scripted", "--pathways", "magic"], "pathways"),
    (["--models", "scripted", "--concurrency", "0"], "concurrency"),
    (["--models", "scripted", "--budget-usd", "-1"], "--budget-usd -1:"),  # the flag typed
    (["--models", "scripted", "--api-base", "other/model=http://x"], "not one of --models"),
])
def test_bad_sweeps_are_refused_before_anything_is_stored(tmp_path, capsys, args, needle):
    db = str(tmp_path / "bad.db")
    code, _, err = run_cli(capsys, "sweep", *args, *TINY_FLAGS, "--yes", "--db", db)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    with Store(db) as store:
        assert store.sweeps.list_sweeps() == [] and store.runs.list_runs() == []


# ----- running: limits, backoff, budget ----------------------------------------------------------
def test_calls_in_flight_never_exceed_the_per_model_limit(tmp_path):
    """Four runs of one model at once against a slow server: at most `concurrency` requests are
    ever in flight there, and the limit is reached (the runs really overlap)."""
    for limit in (1, 3):
        with FakeOpenAI(delay_s=0.03, reply=PLAY) as server:
            config = SweepConfig(games=("trust",), pathways=("none", "history"), models=("hosted_vllm/fake",),
                                 settings={**TINY, "max_retries": 0}, api_bases={"hosted_vllm/fake": (server.base,)},
                                 concurrency=limit, runs_per_model=2)
            store = Store(tmp_path / f"c{limit}.db")
            final, runner = run_sweep(store, config)
            assert final.status == "finished", final.note
            assert server.peak == limit
            assert runner.limits.gate("hosted_vllm/fake").peak == limit
            assert server.completed == store.sweeps.sweep_usage(final.id)["calls"] == 2 * 40


def test_a_rate_limit_pauses_every_call_of_the_model_and_the_sweep_finishes(tmp_path):
    with FakeOpenAI(reply=PLAY).behave(times=3, status=429, headers={"retry-after": "0.05"}) as server:
        config = SweepConfig(games=("trust",), pathways=("none", "history"), models=("hosted_vllm/fake",),
                             settings=TINY, api_bases={"hosted_vllm/fake": (server.base,)}, concurrency=3)
        store = Store(tmp_path / "r.db")
        final, runner = run_sweep(store, config)
    assert final.status == "finished"
    assert runner.limits.gate("hosted_vllm/fake").pauses >= 1
    faults = [s.fault for r in store.sweeps.sweep_runs(final.id) for e in store.episodes.list(r.id)
              for s in store.episodes.steps(e.id, include_prompt=False) if s.fault]
    assert sum(f.count("rate_limit") for f in faults) == 3  # each 429 recorded on its step
    for run in store.sweeps.sweep_runs(final.id):
        check_run_consistency(store, run)


@pytest.fixture
def priced(monkeypatch):
    """openai/gpt-4o-mini (litellm knows its price) served by a fake server on 127.0.0.1."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000000")
    with FakeOpenAI(delay_s=0.005, reply=PLAY, usage="auto") as server:
        yield server


def test_the_budget_stops_the_sweep_cleanly_and_resume_with_more_finishes_it(tmp_path, priced, capsys):
    db = tmp_path / "b.db"
    config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=("openai/gpt-4o-mini",),
                         settings=TINY, api_bases={"openai/gpt-4o-mini": (priced.base,)}, concurrency=2,
                         runs_per_model=2, budget_usd=0.003)
    store = Store(db)
    final, runner = run_sweep(store, config)
    usage = store.sweeps.sweep_usage(final.id)
    assert final.status == "stopped" and "budget of $0.00" in final.note
    assert runner.budget_hit and usage["cost"] >= 0.003
    per_call = usage["cost"] / usage["calls"]
    assert usage["cost"] - 0.003 <= (config.concurrency + 1) * per_call * 1.5  # only calls in flight finish
    assert priced.completed == usage["calls"]  # every paid call is stored
    statuses = [r.status for r in store.sweeps.sweep_runs(final.id)]
    assert "finished" not in statuses and "stopped" in statuses
    # resuming without a new budget is refused; with one, the sweep finishes
    code, _, err = run_cli(capsys, "resume", final.id, "--yes", "--db", str(db))
    assert code == 2 and "budget of $0.00 is spent" in err
    code, out, err = run_cli(capsys, "resume", final.id, "--budget-usd", "1", "--yes", "--db", str(db))
    assert code == 0, err
    assert "finished" in out
    with Store(db) as again:
        assert again.sweeps.get_sweep(final.id).status == "finished"
        assert again.sweeps.get_sweep(final.id).config.budget_usd == 1
        for run in again.sweeps.sweep_runs(final.id):
            check_run_consistency(again, run)


def test_a_failing_model_stops_its_runs_the_others_finish_and_the_exit_code_is_3(tmp_path, capsys):
    db = str(tmp_path / "f.db")
    code, out, err = run_cli(capsys, "sweep", "--games", "trust", "--pathways", "none,summary",
                             "--models", "scripted,hosted_vllm/nobody", "--api-base", "hosted_vllm/nobody=http://127.0.0.1:9/v1",
                             "--max-retries", "0", *TINY_FLAGS, "--yes", "--db", db)
    assert code == 3, err
    assert "hosted_vllm/nobody" in err and "resume" in err
    with Store(db) as store:
        [sweep] = store.sweeps.list_sweeps()
        assert sweep.status == "stopped" and "hosted_vllm/nobody" in sweep.note
        by_model = {}
        for run in store.sweeps.sweep_runs(sweep.id):
            by_model.setdefault(run.config.model, []).append(run.status)
        assert by_model["scripted/trust"] == ["finished", "finished"]
        assert "finished" not in by_model["hosted_vllm/nobody"]


# ----- resume ---------------------------------------------------------------------------------------
def _canonical(store: Store, run) -> list:
    return [tuple(str(v).replace(run.id, "RUN") for v in row) for row in trajectory(store, run.id)]


def test_a_half_done_sweep_resumes_as_a_whole_to_the_same_result(tmp_path, capsys):
    """Interrupted after a few episodes (some runs finished, one mid-episode, some not started),
    `s3gym resume SWEEP` finishes every run; each equals its twin in an uninterrupted sweep."""
    config = SweepConfig(games=("trust", "nullify"), pathways=("none", "history", "summary"), models=("scripted",),
                         settings={"explore_episodes": 3, "eval_every": 3, "eval_episodes": 1}, concurrency=2,
                         runs_per_model=1)
    twin_store = Store(tmp_path / "twin.db")
    twin, _ = run_sweep(twin_store, config)
    assert twin.status == "finished"

    db = tmp_path / "half.db"
    store = Store(db)
    stored, _ = store.sweeps.create_sweep(config)
    seen = {"episodes": 0}

    async def interrupted() -> None:
        runner = SweepRunner(store, stored, backoff_base_s=0)
        task = asyncio.current_task()

        def on_event(event) -> None:
            if isinstance(event, SweepRunEvent) and type(event.event).__name__ == "EpisodeDone":
                seen["episodes"] += 1
                if seen["episodes"] == 12:
                    task.cancel()

        runner.on_event = on_event
        await runner.run()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(interrupted())
    half = store.sweeps.get_sweep(stored.id)
    statuses = [r.status for r in store.sweeps.sweep_runs(stored.id)]
    assert half.status == "stopped" and half.note == "interrupted"
    assert "finished" in statuses and "created" in statuses and "stopped" in statuses
    store.close()

    code, out, err = run_cli(capsys, "resume", stored.id, "--yes", "--db", str(db))
    assert code == 0, err
    assert "runs left" in out and "finished" in out
    with Store(db) as done:
        assert done.sweeps.get_sweep(stored.id).status == "finished"
        twins = {(r.config.game, r.config.pathway): r for r in twin_store.sweeps.sweep_runs(twin.id)}
        for run in done.sweeps.sweep_runs(stored.id):
            check_run_consistency(done, run)
            assert _canonical(done, run) == _canonical(twin_store, twins[(run.config.game, run.config.pathway)])


def test_sweeps_and_runs_list_the_sweep(tmp_path, capsys):
    db = str(tmp_path / "l.db")
    code, out, err = run_cli(capsys, "sweep", "--games", "trust", "--pathways", "none", "--models", "scripted",
                             *TINY_FLAGS, "--yes", "--db", db)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "sweeps", "--json", "--db", db)
    [listed] = json.loads(out)
    assert code == 0 and listed["status"] == "finished" and listed["runs"] == listed["finished"] == 1
    code, out, _ = run_cli(capsys, "runs", "--sweep", listed["id"], "--json", "--db", db)
    [run] = json.loads(out)
    assert run["sweep_id"] == listed["id"] and run["status"] == "finished"
