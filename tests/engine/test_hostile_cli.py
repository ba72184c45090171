"""Hostile text through every command that prints, in a real terminal: a model whose replies and 400
error hold terminal sequences (tests/hostile.py's corpus) plays `s3gym run`, and every reading command
prints a database full of them, on a pseudo-terminal whose output a terminal emulator (pyte) replays.
Nothing may change the title, write the clipboard (no OSC at all), draw above the command's output,
move the cursor off where plain text leaves it, or reach the terminal as a raw control; the hostile
text is shown, visibly (␛, \\x9b, \\u202e)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from s3gym_tui.textgate import STRICT_ENV
from tests.fake_openai import FakeOpenAI
from tests.hostile import ERROR_BODY, hostile_db, hostile_template, reply_for, short  # noqa: F401
from tests.terminal import RICH_OWN, Terminal, run_cli_in_pty

ROOT = Path(__file__).resolve().parents[2]
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("S3GYM_", "TTY_", "FORCE_COLOR", "NO_COLOR"))},
       "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
       STRICT_ENV: "1"}  # text that reaches the console without its source's gate raises (a traceback here)
TINY = ["--episodes", "3", "--eval-every", "3", "--eval-episodes", "1", "--step-cap", "4", "--max-retries", "0"]
SHOWN = "␛"  # how an ESC looks once gated (tables, progress, errors)
JSON_SHOWN = "\\u001b"  # how JSON writes an ESC (--json, export)


def test_every_command_that_prints_keeps_the_terminal_and_shows_the_text(hostile_db, tmp_path):
    path, ids = hostile_db
    db = ["--db", str(path)]
    live = tmp_path / "live.db"
    with FakeOpenAI(reply=reply_for) as server:
        with sqlite3.connect(path) as conn:  # the stopped run resumes against this test's server
            conn.execute("UPDATE runs SET config = json_set(config, '$.api_base', ?) WHERE id = ?",
                         (server.base, ids["stopped"]))
        server.behave(times=14, reply=reply_for)  # a run's worth of hostile replies, then the hostile 400
        server.behave(times=None, status=400, raw_body=ERROR_BODY)
        commands = {
            "run (progress, then the 400 as a one-line error)": (
                ["run", "trust", "-m", "hosted_vllm/fake", "--api-base", server.base, "-p", "summary", *TINY,
                 "--db", str(live)], SHOWN),
            "resume (progress, the 400 again)": (["resume", ids["stopped"], *db], SHOWN),
            "sweep (plan, progress, a run's error)": (
                ["sweep", "--games", "trust", "--pathways", "none", "--models", "hosted_vllm/" + short("osc0-bel"),
                 "--api-base", server.base, "--episodes", "1", "--eval-every", "1", "--eval-episodes", "1",
                 "--step-cap", "2", "--max-retries", "0", "--yes", "--db", str(live)], SHOWN),
            "runs": (["runs", *db], SHOWN),
            "runs --json": (["runs", "--json", *db], JSON_SHOWN),
            "report": (["report", ids["played"], ids["stopped"], ids["named"], *db], SHOWN),
            "report --json": (["report", ids["played"], ids["named"], "--json", *db], JSON_SHOWN),
            "sweeps": (["sweeps", *db], SHOWN),
            "sweeps --json": (["sweeps", "--json", *db], JSON_SHOWN),
            "audit": (["audit", *db], None),
            "search (hostile lines, the match highlighted)": (["search", "pwned", "--limit", "30", *db], SHOWN),
            "search --json": (["search", "pwned", "--json", *db], JSON_SHOWN),
            "export to stdout": (["export", ids["played"], *db], JSON_SHOWN),
            "export of the hostile run": (["export", ids["named"], *db], JSON_SHOWN),
            "trainings": (["trainings", *db], SHOWN),
            "matrix": (["matrix", *db], SHOWN),
            "error: no such run (a hostile argument)": (["report", "nosuch-" + short("osc52-st"), *db],
                                                        "\\x1b]52"),  # the message quotes it with repr
            "error: a hostile output file name": (
                ["export", ids["played"], "-o", str(tmp_path / "no-dir" / short("osc2-st")), *db], SHOWN),
            "rm (names the runs)": (["rm", "--yes", ids["named"], *db], SHOWN),
        }
        results = run_cli_in_pty([args for args, _ in commands.values()], ENV, cwd=ROOT)
    failures = {}
    for (name, (_, visible)), (code, out) in zip(commands.items(), results):
        term = Terminal(160, 3000, above=3)
        term.feed(out)
        problems = term.problems(RICH_OWN)
        cursor = term.plain_text_cursor_problem()
        if cursor:
            problems.append(cursor)
        if "Traceback" in out:
            problems.append("a traceback: " + out[out.index("Traceback"):][:300])
        if visible and visible not in term.shown:
            problems.append(f"the hostile text is not shown ({visible!r} missing): {term.shown.strip()[-300:]!r}")
        if problems:
            failures[name] = problems
    assert not failures, "\n".join(f"{name}: {problems}" for name, problems in failures.items())
