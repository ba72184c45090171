"""Protocol runs as processes of their own: the `s3gym run` / `s3gym resume` a person would type, started
detached (own session, output to a log file next to the database), so a run outlives the screen and the
app that started it. Followed like any headless run, through the store and the run's lease."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from s3gym_tui.models import EVAL_SEED_BASE, EXPLORE_SEED_BASE, RunConfig

STOP_SIGNAL = signal.SIGINT  # what the CLI honours as a clean, resumable stop (engine/interrupt.py)
_RUN_LINE = re.compile(r"^run (\S+) · ", re.MULTILINE)  # `s3gym run` prints it once the run is stored
_ASPIRE_LINE = re.compile(r"^ASPIRE run (\S+): ", re.MULTILINE)  # `s3gym aspire` prints it once stored


def cli_prefix() -> list[str]:
    """The `s3gym` command of this installation (the interpreter running the app)."""
    return [sys.executable, "-m", "s3gym_tui"]


def run_argv(config: RunConfig, db: Path, file_args: Optional[dict] = None) -> list[str]:
    """The `s3gym run …` that creates and drives a run with `config` (every setting spelled out, so
    the config file of the day does not change it). A model argument holding a secret is never put
    on a command line (any local user can read it): it must come from the config file, whose model
    args the command reads itself (`file_args`). Raises ValueError for a config the command line
    cannot express (seed bases other than the paper's, a secret argument not in the config file)."""
    import json

    from s3gym_tui.engine.decoding import secret_args

    if config.explore_seed_base != EXPLORE_SEED_BASE or config.eval_seed_base != EVAL_SEED_BASE:
        raise ValueError("a run with other seed bases cannot be started as `s3gym run`")
    file_args = file_args or {}
    secret = secret_args(config.model_args)
    missing = [key for key, value in secret.items() if file_args.get(key) != value]
    if missing:
        raise ValueError(f"the model argument(s) {', '.join(sorted(missing))} hold a secret, which is not put "
                         f"on a command line: save the model's settings to the config file (⚙, Save), then start")
    model_args = [f"{key}={json.dumps(value)}" for key, value in config.model_args.items()
                  if key not in secret and file_args.get(key) != value]
    argv = [*cli_prefix(), "run", config.game, "--model", config.model, "--pathway", config.pathway,
            "--episodes", str(config.explore_episodes), "--eval-every", str(config.eval_every),
            "--eval-episodes", str(config.eval_episodes), "--history-budget", str(config.history_budget),
            "--step-cap", str(config.step_cap), "--max-tokens", str(config.max_tokens),
            "--temperature", repr(config.temperature), "--timeout", repr(config.timeout_s),
            "--max-retries", str(config.max_retries)]
    if config.decoding_seed is not None:
        argv += ["--seed", str(config.decoding_seed)]
    for base in config.api_bases or ((config.api_base,) if config.api_base else ()):
        argv += ["--api-base", base]
    if config.oracle_feedback:
        argv.append("--oracle-feedback")
    argv += ["--decoding", config.decoding]
    for item in model_args:
        argv += ["--model-arg", item]
    return argv + ["--progress", "plain", "--db", str(db)]


def resume_argv(run_id: str, db: Path) -> list[str]:
    return [*cli_prefix(), "resume", run_id, "--progress", "plain", "--db", str(db)]


def aspire_argv(db: Path, *, goal_id: str, model: str, protocol: str, explicit: bool = False,
                budget: Optional[dict] = None, player: Optional[str] = None) -> list[str]:
    """The `s3gym aspire …` that creates and drives an ASPIRE run (issue 25): a goal of the goal set,
    the agent's model, the protocol, the explicit-goal control and the budget (`budget`: key -> limit,
    None lifting that limit; keys left out keep the command's defaults)."""
    argv = [*cli_prefix(), "aspire", "--goal-id", goal_id, "--model", model, "--protocol", protocol]
    if explicit:
        argv.append("--explicit")
    if player:
        argv += ["--player", player]
    if budget:
        parts = [f"{key}={'none' if value is None else format(value, 'g') if isinstance(value, float) else value}"
                 for key, value in budget.items()]
        argv += ["--budget", ",".join(parts)]
    return argv + ["--db", str(db)]


def aspire_resume_argv(aspire_id: str, db: Path) -> list[str]:
    return [*cli_prefix(), "aspire", "--resume", aspire_id, "--db", str(db)]


def demo_argv(db: Path) -> list[str]:
    """The `s3gym demo` that builds the demo database at `db` (the app opens it itself afterwards)."""
    return [*cli_prefix(), "demo", "--no-open", "--progress", "plain", "--db", str(db)]


def log_dir(db: Path) -> Path:
    """Where the output of runs started from the app goes: `<db stem>-runs/` beside the database."""
    return Path(db).parent / f"{Path(db).stem}-runs"


def shown_argv(argv: list[str]) -> str:
    """The command as a person would type it (`s3gym …`, without the interpreter)."""
    prefix = cli_prefix()
    rest = argv[len(prefix):] if argv[:len(prefix)] == prefix else argv
    return " ".join(["s3gym", *rest])


def logged(argv: list[str]) -> str:
    """The command for the log: credentials in URLs and secret values taken out."""
    from s3gym_tui.secrets import redact_values, strip_url_credentials

    return redact_values(" ".join(strip_url_credentials(a) if "://" in a else a
                                  for a in shown_argv(argv).split(" ")))


@dataclass
class ChildRun:
    """One run process this app started. `run_id` is known for a resume, and found for a new run
    in its log (the `run <id> ·` line) or from the lease its PID holds."""

    argv: list[str]
    log: Path
    process: subprocess.Popen
    run_id: Optional[str] = None
    started: float = field(default_factory=time.monotonic)
    reported: bool = False  # its end was told to the person
    stop_sent: bool = False  # asked to stop (its end is then no surprise, whatever its exit code)
    kind: str = "run"  # "run" (`s3gym run` / `resume`), "aspire" (`s3gym aspire`: run_id is the ASPIRE
    # run's) or "demo" (`s3gym demo`: no run id)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        """Still running (polling also reaps it once it ended: no zombie keeps its lease 'alive')."""
        return self.process.poll() is None

    @property
    def returncode(self) -> Optional[int]:
        return self.process.poll()

    def find_run_id(self, store=None) -> Optional[str]:
        if self.run_id is not None:
            return self.run_id
        line = _ASPIRE_LINE if self.kind == "aspire" else _RUN_LINE
        try:
            found = line.search(self.log.read_text(errors="replace")[:20_000])
        except OSError:
            found = None
        if found:
            self.run_id = found.group(1)
        elif store is not None and self.kind == "aspire":  # its lease (not its practice runs' leases)
            try:
                from s3gym_tui.store.leases import HOST

                self.run_id = next((lease.run_id for lease in store.leases.live_aspire_leases().values()
                                    if lease.pid == self.pid and lease.host == HOST), None)
            except Exception:  # noqa: BLE001 - found at the next look
                pass
        elif store is not None:
            try:
                from s3gym_tui.store.leases import HOST

                self.run_id = next((lease.run_id for lease in store.leases.live_leases().values()
                                    if lease.pid == self.pid and lease.host == HOST), None)
            except Exception:  # noqa: BLE001 - found at the next look
                pass
        return self.run_id

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of its output (why it ended; secret values taken out), or ''."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        from s3gym_tui.secrets import redact_values

        return redact_values("\n".join(text.strip().splitlines()[-lines:]))

    def stop(self) -> bool:
        """Ask it to stop as Ctrl-C does (it stores the stop and stays resumable). False if gone."""
        if not self.alive:
            return False
        try:
            os.kill(self.pid, STOP_SIGNAL)
        except OSError:
            return False
        self.stop_sent = True
        return True


class ChildRuns:
    """The run processes started by this app (`start`), newest last."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)
        self.children: list[ChildRun] = []
        self.credentialed: set[str] = set()  # api bases with credentials this app started children with

    def start(self, argv: list[str], name: str, kind: str = "run") -> ChildRun:
        """Start `argv` detached: its own session (a terminal's Ctrl-C or the app's exit never
        reaches it), no stdin, stdout and stderr into `<log_dir>/<name>-<time>.log`. Credentials in
        URLs (`--api-base http://user:KEY@…`) never go on its command line, which any local user can
        read (`ps`): the command gets the URLs without them, and the child the URLs with them in its
        environment (readable by this user only; secrets.with_credentials), with those of every
        earlier child, so a `resume` of a run this app started gets them back too."""
        from s3gym_tui.secrets import credentials_env, split_url_credentials

        argv, credentialed = split_url_credentials(argv)
        self.credentialed.update(credentialed)
        folder = log_dir(self.db)
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{len(self.children)}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1",  # its lines reach the log as they are printed
               **credentials_env(self.credentialed)}
        with open(log, "ab") as out:
            out.write(f"$ {logged(argv)}\n".encode())
            out.flush()
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, env=env, close_fds=True)
        child = ChildRun(argv, log, process, kind=kind)
        self.children.append(child)
        return child

    def alive(self) -> list[ChildRun]:
        return [child for child in self.children if child.alive]

    def of_run(self, run_id: str) -> Optional[ChildRun]:
        """The newest living process of this app that drives (or starts) `run_id`."""
        return next((child for child in reversed(self.children)
                     if child.alive and child.run_id == run_id), None)

    def of_pid(self, pid: int) -> Optional[ChildRun]:
        return next((child for child in self.children if child.pid == pid), None)
