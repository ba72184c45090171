"""Kill -9 the headless runner many times in a row at random moments, resume it, and check that no
completed step is lost or stored twice and that the finished run equals an uninterrupted one.

    python benchmarks/kill_resume.py [--kills 200] [--seed 0] [--json]

One parent process imports everything once, then forks a child per "life". The child runs the
headless CLI in-process (`s3gym resume RUN --db FILE`, i.e. `cli.main`) and dies by SIGKILL:
either the parent kills it after a random delay (anywhere: start-up, a model call, mid-write), or
the child kills itself at a random write boundary (inside a write transaction before its COMMIT,
or just after the COMMIT). After every death the parent opens the file as the next resume would
and checks: integrity_check, the leakage audit, n_steps == stored steps with contiguous indices
for every episode, every step the child reported committed is stored, nothing stored before is
gone, and every stored row (episodes, steps with their prompts as sent, summaries, checkpoints)
equals the row of an uninterrupted reference run. When a run finishes it must equal the reference
exactly; then the next round starts a new run (games, pathways and models rotate, scripted and
fault-injecting). Randomness is seeded: a failing seed reproduces.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-kill-resume.toml")

from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.store import Store, StoreError, audit  # noqa: E402
from s3gym_tui.store.connection import Connection  # noqa: E402

# (game, pathway, model provider): every game, every pathway, scripted and fault-injecting models
SCENARIOS: list[tuple[str, str, str]] = [
    ("trust", "summary", "scripted"),
    ("nullify", "history", "scripted"),
    ("snake", "history", "fault"),
    ("minesweeper", "summary", "fault"),
    ("chess", "none", "scripted"),
    ("tetris", "summary", "scripted"),
    ("pvz", "history", "fault"),
    ("trust", "history", "fault"),
    ("nullify", "summary", "fault"),
]
ROUND_SIZE = dict(explore_episodes=4, eval_every=2, eval_episodes=2)


def configure_faults() -> None:
    """Fault schedule used by every fault/<game> round (reference and killed runs alike)."""
    from s3gym_tui.providers import fault

    fault.reset()
    fault.SETTINGS.period = 3  # every third request is faulted (cycling through all fault kinds)
    fault.SETTINGS.huge_chars = 20_000
    fault.SETTINGS.retry_after_s = 0.001


def fresh_model_state() -> None:
    """What a new process would have: no retry counts, no cached policies."""
    from s3gym_tui.providers import fault, scripted

    with fault._attempts_lock:
        fault._attempts.clear()
    with scripted._POLICIES.lock:
        scripted._POLICIES.entries.clear()


def fast_backoff() -> None:
    """The CLI's runner backs off 0.5 s, 1 s, ... on transient faults; the injected ones need no wait."""
    from s3gym_tui.engine import runner

    original = runner.call_settings

    def call_settings(config, backoff_base_s: float = 0.5):
        return original(config, 0.0)

    runner.call_settings = call_settings


# ----------------------------------------------------------------------------------- snapshots

def snapshot(store: Store, run_id: str) -> dict[str, Any]:
    """Everything about a run that must be reproducible (no ids of random origin, no times)."""
    versions = {s.id: s.version for s in store.summaries.list(run_id)}
    episodes, steps = {}, {}
    for e in store.episodes.list(run_id):
        episodes[e.id] = dict(seed=e.seed, phase=e.phase, mode=e.mode, index=e.index,
                              checkpoint=e.checkpoint, status=e.status, score=e.score,
                              n_steps=e.n_steps, summary=versions.get(e.summary_id),
                              history=list(e.history_episode_ids), cut=e.history_cut)
        for s in store.episodes.steps(e.id):
            try:
                prompt = store.prompts.prompt_of(s)
            except StoreError as err:  # a prompt whose base step was lost cannot be rebuilt
                prompt = f"<unreadable: {err}>"
            steps[(e.id, s.index)] = (s.observation, prompt, s.reply, s.action,
                                      s.self_score, s.reward, s.feedback, s.valid, s.terminated,
                                      s.truncated, s.actor, s.fault, s.tokens_in, s.tokens_out)
    summaries = {s.version: (s.retain, s.avoid, s.next, list(s.source_episode_ids), s.for_episode_id,
                             s.author, s.status, s.pinned) for s in store.summaries.list(run_id)}
    checkpoints = {c.x: (list(c.episode_ids), list(c.scores)) for c in store.checkpoints.list(run_id)}
    return {"status": store.runs.get_run(run_id).status, "episodes": episodes, "steps": steps,
            "summaries": summaries, "checkpoints": checkpoints}


def structural_problems(path: Path) -> list[str]:
    """Integrity, n_steps == stored steps, contiguous step indices, no duplicate (episode, index)."""
    problems = []
    conn = sqlite3.connect(path)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            problems.append(f"integrity_check: {check[:3]}")
        rows = conn.execute(
            'SELECT e.id, e.n_steps, count(s."index"), coalesce(max(s."index"), -1), '
            'count(DISTINCT s."index") FROM episodes e LEFT JOIN steps s ON s.episode_id = e.id '
            'GROUP BY e.id').fetchall()
        for episode_id, n_steps, count, top, distinct in rows:
            if not (n_steps == count == distinct == top + 1):
                problems.append(f"episode {episode_id}: n_steps {n_steps}, {count} stored steps, "
                                f"{distinct} distinct indices, max index {top}")
        orphans = conn.execute("SELECT count(*) FROM steps WHERE episode_id NOT IN "
                               "(SELECT id FROM episodes)").fetchone()[0]
        if orphans:
            problems.append(f"{orphans} steps without an episode")
    finally:
        conn.close()
    return problems


def compare_partial(got: dict, ref: dict) -> list[str]:
    """Problems of an interrupted run's stored state against the finished reference run."""
    problems = []
    if got["status"] not in ("created", "running", "finished"):
        problems.append(f"run status {got['status']!r}")
    for key, row in got["steps"].items():
        if key not in ref["steps"]:
            problems.append(f"step {key} is not in the reference run")
        elif row != ref["steps"][key]:
            diff = [i for i, (a, b) in enumerate(zip(row, ref["steps"][key])) if a != b]
            problems.append(f"step {key} differs from the reference in fields {diff}")
    for episode_id, ep in got["episodes"].items():
        want = ref["episodes"].get(episode_id)
        if want is None:
            problems.append(f"episode {episode_id} is not in the reference run")
            continue
        static = ("seed", "phase", "mode", "index", "checkpoint", "summary", "history", "cut")
        bad = [k for k in static if ep[k] != want[k]]
        if bad:
            problems.append(f"episode {episode_id} differs in {bad}")
        if ep["status"] == "finished" and (ep["score"], ep["n_steps"]) != (want["score"], want["n_steps"]):
            problems.append(f"finished episode {episode_id}: score/steps {ep['score']}/{ep['n_steps']} "
                            f"!= {want['score']}/{want['n_steps']}")
        if ep["status"] not in ("running", "finished"):
            problems.append(f"episode {episode_id} has status {ep['status']!r}")
        if ep["n_steps"] > want["n_steps"]:
            problems.append(f"episode {episode_id} has more steps than the reference")
    for version, row in got["summaries"].items():
        if ref["summaries"].get(version) != row:
            problems.append(f"summary v{version} differs from the reference")
    for x, row in got["checkpoints"].items():
        if ref["checkpoints"].get(x) != row:
            problems.append(f"checkpoint x={x} differs from the reference")
    return problems


def compare_final(got: dict, ref: dict) -> list[str]:
    problems = compare_partial(got, ref)
    for part in ("episodes", "steps", "summaries", "checkpoints"):
        missing = set(ref[part]) - set(got[part])
        if missing:
            problems.append(f"{len(missing)} {part} of the reference are missing, e.g. {sorted(missing, key=str)[0]}")
    if got["status"] != "finished":
        problems.append(f"run status {got['status']!r} after the last resume")
    if not problems and got != ref:
        problems.append("finished run differs from the reference")
    return problems


def verify(path: Path, run_id: str, ref: dict, logged: set, before: set, final: bool = False
           ) -> tuple[list[str], set]:
    """All checks after a death (or at the end of a round). Returns (problems, stored step keys)."""
    problems = structural_problems(path)
    with Store(path, check=False) as store:
        got = snapshot(store, run_id)
        report = audit(store)
    if not report.ok:
        problems += [f"audit: {p}" for p in report.lines()]
    stored = set(got["steps"])
    lost = logged - stored
    if lost:
        problems.append(f"{len(lost)} committed steps are missing, e.g. {sorted(lost)[0]}")
    gone = before - stored
    if gone:
        problems.append(f"{len(gone)} steps stored earlier are gone, e.g. {sorted(gone)[0]}")
    problems += compare_final(got, ref) if final else compare_partial(got, ref)
    return problems, stored


# ----------------------------------------------------------------------------------- a life

@dataclass
class Life:
    mode: str  # "timer" | "in_tx" | "after_commit"
    param: float  # delay in seconds, or the write number to die at


def _install_child_hooks(life: Life, log_fd: int) -> None:
    """In the child: report committed steps to the parent, and die at a write boundary."""
    from s3gym_tui.store.episodes import Episodes

    writes = {"n": 0}
    target = int(life.param)
    original_tx = Connection._tx

    @contextmanager
    def tx(self, what):
        outer = self.conn is not None and not self.conn.in_transaction
        with original_tx(self, what) as conn:
            yield conn
            if outer:
                writes["n"] += 1
                if life.mode == "in_tx" and writes["n"] == target:
                    os.kill(os.getpid(), signal.SIGKILL)  # body done, COMMIT not yet run
        if outer and life.mode == "after_commit" and writes["n"] == target:
            os.kill(os.getpid(), signal.SIGKILL)

    Connection._tx = tx
    original_add_steps = Episodes.add_steps

    def add_steps(self, steps, repairs=None):
        steps = list(steps)
        n = original_add_steps(self, steps, repairs)
        os.write(log_fd, "".join(f"{s.episode_id}\t{s.index}\n" for s in steps).encode())
        return n

    Episodes.add_steps = add_steps


def stored_status(db: Path, run_id: str) -> Optional[str]:
    """The run's status as stored, read outside the Store (a plain read-only connection)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def run_life(db: Path, run_id: str, life: Life, log_path: Path, err_path: Path) -> tuple[bool, int]:
    """Fork a child that resumes the run through the CLI. Returns (killed, exit code)."""
    fresh_model_state()
    pid = os.fork()
    if pid == 0:  # child
        code = 70
        try:
            log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            devnull = os.open(os.devnull, os.O_WRONLY)
            err_fd = os.open(err_path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
            os.dup2(devnull, 1)
            os.dup2(err_fd, 2)
            if life.mode != "timer":
                _install_child_hooks(life, log_fd)
            else:
                _install_child_hooks(Life("none", 0), log_fd)
            from s3gym_tui.cli import main

            code = main(["resume", run_id, "--db", str(db)])
        except BaseException:  # noqa: BLE001 - reported through the exit code and stderr file
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    if life.mode == "timer":
        deadline = time.monotonic() + life.param
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return False, os.waitstatus_to_exitcode(status)
            time.sleep(0.005)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code == -signal.SIGKILL, code


# ----------------------------------------------------------------------------------- the loop

@dataclass
class Figures:
    kills: int = 0
    timer_kills: int = 0
    in_tx_kills: int = 0
    after_commit_kills: int = 0
    late_kills: int = 0  # landed after the run's last commit: the run was already complete
    lives: int = 0
    rounds: int = 0
    runs_finished: int = 0
    steps_final: int = 0
    checks: int = 0
    violations: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)
    seconds: float = 0.0


def reference_run(path: Path, run_id: str, config: RunConfig) -> dict:
    from s3gym_tui.engine.runner import ProtocolRunner

    fresh_model_state()
    with Store(path) as store:
        run = store.runs.create_run(config, run_id=run_id)
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        return snapshot(store, run_id)


def pick_life(rng: random.Random) -> Life:
    r = rng.random()
    if r < 0.4:
        delay = rng.uniform(0.0, 0.15) if rng.random() < 0.25 else rng.uniform(0.15, 1.2)
        return Life("timer", delay)
    return Life("in_tx" if r < 0.7 else "after_commit", rng.randint(1, 40))


def chaos(kills: int, seed: int, workdir: Path, scenarios: Optional[list[int]] = None,
          max_lives: int = 100_000, log=print) -> Figures:
    configure_faults()
    fast_backoff()
    rng = random.Random(seed)
    fig = Figures()
    started = time.perf_counter()
    db = workdir / "killed.db"
    order = scenarios if scenarios is not None else list(range(len(SCENARIOS)))
    while fig.kills < kills and fig.lives < max_lives:
        game, pathway, provider = SCENARIOS[order[fig.rounds % len(order)]]
        run_id = f"k{fig.rounds:03d}-{game}-{pathway}-{provider}"
        config = RunConfig(model=f"{provider}/{game}", game=game, pathway=pathway, **ROUND_SIZE)
        ref = reference_run(workdir / f"ref-{run_id}.db", run_id, config)
        with Store(db) as store:
            store.runs.create_run(config, run_id=run_id)
        fig.rounds += 1
        fig.scenarios.append(run_id)
        log_path, err_path = workdir / f"{run_id}.log", workdir / f"{run_id}.err"
        stored: set = set()
        while True:
            life = pick_life(rng) if fig.kills < kills else Life("timer", 3600.0)
            killed, code = run_life(db, run_id, life, log_path, err_path)
            fig.lives += 1
            if killed:
                fig.kills += 1
                setattr(fig, f"{life.mode}_kills", getattr(fig, f"{life.mode}_kills") + 1)
            elif code != 0:
                tail = err_path.read_text(errors="replace").strip().splitlines()[-3:]
                fig.violations.append(f"{run_id}: a life exited with code {code}: {' | '.join(tail)}")
                break
            logged = {(line.split("\t")[0], int(line.split("\t")[1]))
                      for line in log_path.read_text().splitlines() if line}
            # A kill can land after the run's last commit: the run is then complete and another
            # resume would rightly refuse it ("nothing left to run"), so the round ends here.
            finished = not killed or stored_status(db, run_id) == "finished"
            fig.late_kills += killed and finished
            problems, stored = verify(db, run_id, ref, logged, stored, final=finished)
            fig.checks += 1
            if problems:
                fig.violations += [f"{run_id} after life {fig.lives} ({life.mode} {life.param:g}): {p}"
                                   for p in problems[:5]]
                break
            if finished:
                fig.runs_finished += 1
                fig.steps_final += len(stored)
                break
            if fig.lives >= max_lives:
                fig.violations.append(f"{run_id}: gave up after {max_lives} lives")
                break
        log(f"round {fig.rounds}: {run_id}: {fig.kills} kills so far, {len(stored)} steps, "
            f"{len(fig.violations)} violations")
        if fig.violations:
            break
    fig.seconds = time.perf_counter() - started
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="SIGKILLs to deliver (rounds finish)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenarios", default="", help="comma-separated indices into SCENARIOS")
    parser.add_argument("--workdir", default="", help="keep the databases here (default: temp dir)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    scenarios = [int(i) for i in args.scenarios.split(",") if i.strip()] or None
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        fig = chaos(args.kills, args.seed, workdir, scenarios,
                    log=(lambda *a: print(*a, file=sys.stderr)) if args.json else print)
    if args.json:
        print(json.dumps(fig.__dict__))
        return
    from benchmarks._util import print_table

    print_table(f"kill -9 and resume (seed {args.seed})", ["figure", "value"], [
        ["kills survived (SIGKILL)", fig.kills],
        ["  by timer (anywhere)", fig.timer_kills],
        ["  inside a write transaction", fig.in_tx_kills],
        ["  just after a commit", fig.after_commit_kills],
        ["  after the run's last commit (run complete)", fig.late_kills],
        ["lives (processes)", fig.lives],
        ["runs (rounds) finished", f"{fig.runs_finished} of {fig.rounds}"],
        ["checks of the stored state", fig.checks],
        ["steps in the finished runs", fig.steps_final],
        ["violations (data lost, duplicated or different)", len(fig.violations)],
        ["seconds", fig.seconds],
    ])
    for v in fig.violations:
        print("VIOLATION", v)
    sys.exit(1 if fig.violations else 0)


if __name__ == "__main__":
    main()
