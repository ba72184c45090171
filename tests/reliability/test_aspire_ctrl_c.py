"""Ctrl-C on a headless `s3gym aspire` (a real SIGINT to the process, mid-work): exit 130, the resume line,
the ASPIRE run interrupted with nothing half-recorded; `s3gym resume ID` finishes it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from s3gym_tui.store import Store

from tests import cli_fork

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}


def _practice_steps(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with Store(db, read_only=True) as store:
            runs = store.aspire.list_aspire_runs()
            if not runs:
                return 0
            return sum(e.n_steps for link in store.aspire.aspire_links(runs[0].id, "practice")
                       for e in store.episodes.list(link.run_id))
    except Exception:  # the file is being created
        return 0


def test_sigint_mid_practice_then_resume(tmp_path: Path):
    db = tmp_path / "a.db"
    # `python -m s3gym_tui aspire ...` and `resume`, forked from the preloaded CLI (tests/cli_fork.py)
    proc = cli_fork.spawn(["aspire", "--goal-id", "reactive", "--model", "scripted", "--step-cap", "40", "--db",
                           str(db)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _practice_steps(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Store(db) as store:
        aid = store.aspire.list_aspire_runs()[0].id
        assert store.aspire.get_aspire_run(aid).status == "interrupted"
        before = len(store.aspire.aspire_decisions(aid))
    assert proc.returncode == 130, err
    assert f"resume with: s3gym aspire --resume {aid}" in err and "Traceback" not in err
    done = cli_fork.run(["resume", aid, "--db", str(db)], cwd=ROOT, env=ENV, capture_output=True, text=True,
                        timeout=600)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        run = store.aspire.get_aspire_run(aid)
        decisions = store.aspire.aspire_decisions(aid)
        practice = [store.runs.get_run(link.run_id) for link in store.aspire.aspire_links(aid, "practice")]
    assert run.status == "finished" and len(decisions) > before
    assert [d.idx for d in decisions] == list(range(len(decisions)))
    assert [d.tool for d in decisions] == ["look", "practise", "update", "validate", "update", "submit"]
    assert len(practice) == 1 and practice[0].status == "finished"  # the interrupted run was resumed, not redone
