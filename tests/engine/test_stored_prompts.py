"""Every stored prompt reads back byte for byte as the prompt the model provider received.

Runs of all seven games on every pathway (history and summary put Hint Messages blocks into the
prompts), human steps between model steps, forks at the start, middle and end of an episode, and
a run killed with SIGKILL in another process and resumed here. Prompts are captured inside the
scripted provider (tests/engine/sent_recorder.py), i.e. after litellm, as the model got them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_tui.engine.play import fork_session
from s3gym_tui.engine.runner import ProtocolRunner, call_settings
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

from tests.engine import sent_recorder

ROOT = Path(__file__).resolve().parents[2]


def is_delta(stored: str) -> bool:
    """A stored prompt made of copies of an earlier prompt of its episode plus new text."""
    return json.loads(stored)["base"] is not None


@pytest.fixture
def sent(monkeypatch):
    records: list[dict] = []
    undo = sent_recorder.install(records.append)
    yield records
    undo()


def _by_key(records: list[dict]) -> dict[tuple, list[str]]:
    out: dict[tuple, list[str]] = defaultdict(list)
    for r in records:
        if r["task"] == "act":
            game, mode, seed, actions = r["key"]
            out[(game, mode, seed, tuple(actions))].append(r["prompt"])
    return out


def _stored(path: Path, episode_ids=None) -> list[tuple[tuple, str, str]]:
    """(request key, prompt read back, stored form) of every step with a prompt, read in ways that
    must agree: prompt_of on a warm store, step_prompt in order on a second store, for every fifth
    and the last step step_prompt on a just-opened store, and the SQL view step_prompts."""
    cold_store, warm = Store(path, check=False), Store(path, check=False)
    conn = sqlite3.connect(path)
    in_sql = {(e, i): p for e, i, p in conn.execute("SELECT episode_id, step_index, prompt FROM step_prompts")
              if episode_ids is None or e in episode_ids}
    conn.close()
    out = []
    for episode in warm.episodes.list():
        if episode_ids is not None and episode.id not in episode_ids:
            continue
        steps = warm.episodes.steps(episode.id)
        actions = [s.action for s in steps]
        for step in steps:
            if not step.prompt:
                continue
            text = warm.prompts.prompt_of(step)
            assert text == in_sql.pop((episode.id, step.index))
            if step.index % 5 == 4 or step.index == len(steps) - 1:  # random access, cache empty
                cold = Store(path, check=False)
                assert cold.prompts.step_prompt(episode.id, step.index) == text
                cold.close()
            assert text == cold_store.prompts.step_prompt(episode.id, step.index)
            key = (episode.game, episode.mode, episode.seed, tuple(actions[:step.index]))
            out.append((key, text, step.prompt))
    assert not in_sql  # the view has no other rows
    return out


def _run(path: Path, run_id: str, **config):
    store = Store(path)
    run = store.runs.create_run(RunConfig(**config), run_id=run_id)
    return store, asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


@pytest.mark.parametrize("game", games.names())
@pytest.mark.parametrize("pathway", ["none", "history", "summary"])
def test_every_stored_prompt_is_the_prompt_sent(tmp_path, sent, game, pathway):
    path = tmp_path / "run.db"
    store, run = _run(path, "r", model=f"scripted/{game}", game=game, pathway=pathway,
                      explore_episodes=3, eval_every=3, eval_episodes=1)
    assert run.status == "finished"
    stored = _stored(path)
    sent_by_key = _by_key(sent)
    for key, text, _ in stored:
        assert text in sent_by_key[key], f"stored prompt of {key[:3]} after {len(key[3])} actions was not sent"
    # one call per stored step (no faults, no retries): the same prompts, as many times each
    assert Counter(t for _, t, _ in stored) == Counter(p for ps in sent_by_key.values() for p in ps)
    forms = [raw for _, _, raw in stored]
    if max(len(k[3]) for k, _, _ in stored) > 0:
        assert any(is_delta(raw) for raw in forms), "no prompt was stored as a delta"
    if pathway == "history":
        assert any('{"text":' in raw for raw in forms), "the Hint Messages block was never shared"


def test_human_steps_between_model_steps_and_forks_read_back_as_sent(tmp_path, sent):
    path = tmp_path / "run.db"
    store, run = _run(path, "r", model="scripted/snake", game="snake", pathway="history",
                      explore_episodes=2, eval_every=2, eval_episodes=1)
    source = max(store.episodes.list(run.id, phase="explore"), key=lambda e: e.n_steps)
    assert source.n_steps > 10
    forks = []
    for at in (0, source.n_steps // 2, source.n_steps - 1):
        session = fork_session(store, source.id, at, call_settings(run.config, 0))  # as the source
        forks.append(session.episode.id)
        if not session.done:  # a human step, then the model again: its prompt is based further back
            session.commit(None, action=games.make("snake").sample_action(__import__("random").Random(at)),
                           actor="human")
        asyncio.run(session.play())
    sent_by_key = _by_key(sent)
    stored = _stored(path, set(forks) | {source.id})
    for key, text, raw in stored:
        assert text in sent_by_key[key]
    fork_rows = sqlite3.connect(path).execute(
        "SELECT prompt FROM steps WHERE episode_id IN (%s) AND prompt <> ''" % ",".join("?" * len(forks)),
        forks).fetchall()
    assert any(is_delta(raw) for (raw,) in fork_rows)  # a fork's copied steps are based on its own copies


def _steps_stored(db: Path) -> int:
    try:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def test_a_run_killed_mid_episode_then_resumed_stores_the_prompts_sent(tmp_path, sent):
    db, record = tmp_path / "kill.db", tmp_path / "sent.jsonl"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
           sent_recorder.ENV_VAR: str(record), "PYTHONPATH": str(ROOT)}
    script = ("import sys; import tests.engine.sent_recorder as r; r.install_from_env(); "
              "from s3gym_tui.cli import main; sys.exit(main(sys.argv[1:]))")
    args = ["run", "tetris", "-m", "scripted/tetris", "-p", "history", "--episodes", "2", "--eval-every", "2",
            "--eval-episodes", "1", "--db", str(db)]
    proc = subprocess.Popen([sys.executable, "-c", script, *args], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and _steps_stored(db) < 90:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    store = Store(db)
    running = [e for e in store.episodes.list() if e.status == "running"]
    assert running and running[0].n_steps > 0  # killed inside an episode: the resume continues it
    run = store.runs.list_runs()[0]
    final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    assert final.status == "finished"
    records = sent_recorder.read(record) + sent
    sent_by_key = _by_key(records)
    stored = _stored(db)
    assert len(stored) == sum(e.n_steps for e in store.episodes.list())
    for key, text, _ in stored:
        assert text in sent_by_key[key]
    resumed = running[0]
    raw = {s.index: s.prompt for s in store.episodes.steps(resumed.id)}
    first_after = min(i for i in raw if i >= resumed.n_steps)
    assert is_delta(raw[first_after])  # the resumed session continued the delta chain


def test_a_secret_in_a_prompt_is_redacted_and_the_delta_chain_still_rebuilds(tmp_path, sent, monkeypatch):
    """A secret typed into an action reaches later prompts (as history): the store keeps those prompts
    with the secret redacted, every one rebuilt exactly as the redacted prompt that was sent."""
    from s3gym_tui.engine.play import new_play_session
    from s3gym_tui.secrets import redact_values

    secret = "sk-test-canary-4242424242"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    path = tmp_path / "secret.db"
    store = Store(path)
    session = new_play_session(store, "trust", "explore", 3, call_settings(RunConfig(model="scripted/trust",
                                                                                  game="trust"), 0))
    session.commit(asyncio.run(session.propose()))  # a first model step to base the deltas on
    session.commit(None, action=f"collaborate {secret}", actor="human")
    for _ in range(4):
        session.commit(asyncio.run(session.propose()))
    raw = sqlite3.connect(path).execute("SELECT group_concat(prompt, '') FROM steps").fetchone()[0]
    assert secret not in raw and "[redacted]" in Store(path).prompts.step_prompt(session.episode.id, 5)
    sent_by_key = defaultdict(list)  # the store keeps the human's action redacted too
    for key, prompts in _by_key(sent).items():
        sent_by_key[key[:3] + (tuple(redact_values(a) for a in key[3]),)] += [redact_values(p) for p in prompts]
    stored = _stored(path)
    assert len(stored) == 5 and sum(is_delta(r) for _, _, r in stored) >= 4
    for key, text, _ in stored:
        assert text in sent_by_key[key]
