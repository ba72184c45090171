"""A training's status is true: while a training evaluates, its evaluation run is driven (a lease, like
any run), so `s3gym runs` does not call it interrupted and `s3gym trainings` names the driving process;
after the process is killed (SIGKILL) both say interrupted, not 'running' / 'evaluating' forever."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from s3gym_tui.cli import main
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, Training, TrainingCheckpoint
from s3gym_tui.training.evaluate import create_eval_run

# Evaluates training `t-slow` with a model that takes 0.3 s a reply (a served checkpoint on a busy CPU).
_EVALUATE = """
import asyncio, sys, time
import litellm
from litellm import CustomLLM
from s3gym_tui.providers import register
from s3gym_tui.providers._common import build_response
from s3gym_tui.store import Store
from s3gym_tui.training.pipeline import Hooks, evaluate_all

class Slow(CustomLLM):
    def completion(self, model, messages, *args, model_response=None, **kwargs):
        time.sleep(0.3)
        return build_response(model_response, f"slow/{model}", "Answer: cheat, Score: 1", prompt_tokens=1,
                              completion_tokens=1)

    async def acompletion(self, model, messages, *args, model_response=None, **kwargs):
        await asyncio.sleep(0.3)
        return build_response(model_response, f"slow/{model}", "Answer: cheat, Score: 1", prompt_tokens=1,
                              completion_tokens=1)

register()
litellm.custom_provider_map = list(litellm.custom_provider_map) + [{"provider": "slow", "custom_handler": Slow()}]
litellm.utils.custom_llm_setup()
store = Store(sys.argv[1])
asyncio.run(evaluate_all(store, store.trainings.get_training("t-slow"), Hooks()))
"""


def _json(args: list[str], capsys) -> list[dict]:
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _wait(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_an_evaluating_training_is_driven_and_a_killed_one_is_interrupted(tmp_path, capsys):
    db = tmp_path / "s.db"
    with Store(db) as store:
        source = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", explore_episodes=1,
                                                 eval_every=1, eval_episodes=1))
        training = store.trainings.add_training(Training(id="t-slow", games=("trust",), source_run=source.id, base="x",
                                                         status="evaluating", backend="remote"))
        for x in (0, 1):
            store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id="t-slow", x=x, model=f"slow/m{x}"))
        run = create_eval_run(store, training, source.config, [0, 1], eval_episodes=2, step_cap=40)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _EVALUATE, str(db)], env=env)
    try:
        with Store(db) as store:
            _wait(lambda: any(store.episodes.steps(e.id) for e in store.episodes.list(run.id)))
        runs = {r["id"]: r["shown_status"] for r in _json(["runs", "--json", "--db", str(db)], capsys)}
        assert runs[run.id] == f"running · PID {proc.pid}"  # driven, not 'interrupted'
        (shown,) = _json(["trainings", "--json", "--db", str(db)], capsys)
        assert shown["status"] == "evaluating" and shown["shown_status"] == f"evaluating · PID {proc.pid}"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    runs = {r["id"]: r["shown_status"] for r in _json(["runs", "--json", "--db", str(db)], capsys)}
    assert runs[run.id] == "interrupted"
    (shown,) = _json(["trainings", "--json", "--db", str(db)], capsys)
    assert shown["status"] == "evaluating" and shown["shown_status"] == "interrupted"
    assert main(["trainings", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "interrupted" in out and "evaluating" not in out


def test_an_interrupted_training_lists_the_updates_it_logged(tmp_path, capsys):
    """A GRPO training interrupted after its first update has no recorded total yet; the table counts
    the updates it logged (it said 'updates 0' beside 'no signal 0/1')."""
    from s3gym_tui.store.records import LossPoint

    db = tmp_path / "s.db"
    with Store(db) as store:
        store.trainings.add_training(Training(id="t-cut", games=("trust",), base="x", method="grpo",
                                              status="interrupted", backend="local"))
        store.trainings.add_losses("t-cut", [LossPoint(step=1, loss=0.1, phase="grpo",
                                                       metrics={"reward_std": 0.5, "frac_reward_zero_std": 0.0})])
    assert main(["trainings", "--db", str(db)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "t-cut" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[cells.index("interrupted") + 4] == "1"  # reward, examples, checkpoints, updates
