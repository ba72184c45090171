"""Time from Ctrl-C (SIGINT) to the exit of `s3gym train` (SFT, GRPO) and `s3gym distill`, as a person
sees it: the command runs as its own process, the signal is sent once the training has stored its
first loss (an update in progress), and the clock stops when the process has exited. Also printed:
the exit code (130 expected), the updates stored before the stop, and the resume line.

    LITELLM_LOCAL_MODEL_COST_MAP=True nice .venv/bin/python benchmarks/stop_latency.py [--base default|DIR]

--base default is the bundled SmolLM2-135M (a heavy job: check `uptime` first); a directory is any HF
model (the tests' tiny random model works: seconds). Data from scripted Trust and Snake runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _losses(db: Path) -> int:
    from s3gym_tui.store import Store

    with Store(db) as store:
        return sum(len(store.trainings.losses(t.id)) for t in store.trainings.list())


def _command(args: list[str], db: Path, env: dict, sig: int) -> dict:
    before = _losses(db)
    child = subprocess.Popen([sys.executable, "-m", "s3gym_tui", *args, "--db", str(db), "--progress", "none"],
                             env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    while _losses(db) <= before and child.poll() is None:
        time.sleep(0.05)
    first_loss = time.monotonic() - started
    if child.poll() is not None:
        return {"error": child.stderr.read()[-400:] if child.stderr else "exited early"}
    sent = time.monotonic()
    child.send_signal(sig)
    _, err = child.communicate(timeout=1800)
    took = time.monotonic() - sent
    resume = next((line for line in err.splitlines() if line.startswith("resume with:")), "")
    return {"first_loss_s": first_loss, "signal_to_exit_s": took, "code": child.returncode, "resume": resume,
            "updates": _losses(db) - before}


def _experts(db: Path, base: str, env: dict) -> list[str]:
    """Two small SFT experts (trust, snake) to distill from."""
    from s3gym_tui.store import Store

    ids = []
    for game in ("trust", "snake"):
        run = _source(db, game)
        subprocess.run([sys.executable, "-m", "s3gym_tui", "train", run, "--base", base, "--epochs", "1",
                        "--max-examples", "4", "--eval-episodes", "1", "--step-cap", "1", "--db", str(db),
                        "--progress", "none"], env=env, cwd=str(ROOT), check=True, capture_output=True)
        with Store(db) as store:
            ids.append(store.trainings.list(source_run=run)[0].id)
    return ids


def _source(db: Path, game: str) -> str:
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store

    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none", explore_episodes=2,
                                              eval_every=2, eval_episodes=1, step_cap=6))
        return asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol()).id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="default", help="default (the bundled model) or an HF model directory")
    parser.add_argument("--signal", default="SIGINT", choices=("SIGINT", "SIGTERM"))
    parser.add_argument("--only", default="sft,grpo,distill")
    args = parser.parse_args()
    sig = getattr(signal, args.signal)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; base {args.base}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "stop.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "S3GYM_TRAINING_DIR": str(folder / "training")}
        common = ["--base", args.base, "--eval-episodes", "1", "--step-cap", "1"]
        wanted = args.only.split(",")
        if "sft" in wanted:
            run = _source(db, "trust")
            rows.append(("sft", _command(["train", run, "--max-steps", "40", "--max-examples", "8", *common],
                                         db, env, sig)))
        if "grpo" in wanted:
            run = _source(db, "trust")
            grpo = ["train", run, "--method", "grpo", "--updates", "20", "--generations", "2", "--states-per-update",
                    "1", "--completion-tokens", "20", "--rollout-step-cap", "2", *common]
            # the signal comes at the first stored loss: a GRPO update without the warm start, a warm-start step with it
            rows.append(("grpo (update)", _command([*grpo, "--warm-start", "0"], db, env, sig)))
            rows.append(("grpo (warm start)", _command(grpo, db, env, sig)))
        if "distill" in wanted:
            experts = _experts(db, args.base, env)
            rows.append(("distill (phase 1)", _command(["distill", *experts, "--rollout-episodes", "1",
                                                        "--rollout-step-cap", "4", "--phase1-steps", "40",
                                                        "--updates", "4", "--eval-episodes", "1", "--step-cap", "1"],
                                                       db, env, sig)))
    print(f"{'command':<20}{'first loss s':>14}{args.signal + ' -> exit s':>18}{'exit':>6}{'updates':>9}  resume line")
    for name, r in rows:
        if "error" in r:
            print(f"{name:<20} failed: {r['error']}")
            continue
        print(f"{name:<20}{r['first_loss_s']:>14.1f}{r['signal_to_exit_s']:>18.2f}{r['code']:>6}{r['updates']:>9}  "
              f"{r['resume']}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
