"""Helpers of the reliability tests: database fingerprints, the fault schedule's expected evidence."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Optional

from s3gym_tui.models import Step
from s3gym_tui.providers import fault

NO_ANSWER = "<no parsable answer>"


def file_bytes(path: Path) -> dict[str, str]:
    """sha256 of the database file and its WAL (the bytes a refused operation must not change)."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            out[suffix or "db"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def dump(path: Path) -> list[str]:
    """The logical content of a database (SQL dump), read without writing anything."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {text!r}"
    assert "Traceback" not in text
    return lines[0]


def expected_fault(seed: int, index: int, task: str = "act") -> Optional[str]:
    """The fault the fault provider's schedule puts on step `index` of an episode on `seed`."""
    return fault.scheduled_fault({"seed": seed, "actions": ["x"] * index, "task": task})


TRANSIENT_NOTE = {"timeout": "timeout", "rate_limit": "rate_limit",
                  "rate_limit_no_retry_after": "rate_limit", "server_error": "server_error",
                  "connection": "connection"}


def fault_evidence(kind: Optional[str], step: Step) -> list[str]:
    """Problems if `step` does not show exactly the evidence of fault `kind` (None: a clean call)."""
    problems = []
    note = step.fault or ""
    if kind is None:
        if step.fault is not None:
            problems.append(f"clean call but fault {step.fault!r}")
        if not step.reply.startswith("Reference policy move."):
            problems.append("clean call but not the scripted reply")
        return problems
    if kind in TRANSIENT_NOTE:
        if TRANSIENT_NOTE[kind] not in note:
            problems.append(f"{kind}: fault column {note!r}")
        if not step.reply.startswith("Reference policy move."):
            problems.append(f"{kind}: the retry's reply was not used")
    elif kind == "empty":
        if step.reply != "" or "empty reply" not in note or step.action != NO_ANSWER:
            problems.append(f"empty: reply {step.reply[:40]!r} fault {note!r} action {step.action!r}")
    elif kind == "garbage":
        if "no 'Answer:' line" not in note or step.action != NO_ANSWER:
            problems.append(f"garbage: fault {note!r} action {step.action!r}")
    elif kind == "no_score":
        if step.self_score is not None or "self-score" not in note or step.action == NO_ANSWER:
            problems.append(f"no_score: score {step.self_score!r} fault {note!r}")
    elif kind == "huge":
        if len(step.reply) < fault.SETTINGS.huge_chars or step.action == NO_ANSWER or step.fault:
            problems.append(f"huge: reply of {len(step.reply)} chars, fault {note!r}")
    elif kind == "wrong_language":
        if "我认为" not in step.reply or "no 'Answer:' line" not in note:
            problems.append(f"wrong_language: fault {note!r}")
    elif kind == "bad_utf8":
        step.reply.encode("utf-8")  # stored text is valid UTF-8
        if "invalid UTF-8" not in note or "broken" not in step.reply or step.action == NO_ANSWER:
            problems.append(f"bad_utf8: fault {note!r} reply {step.reply[:40]!r}")
    elif kind == "injection":
        if "Ignore previous instructions" not in step.reply or step.action.upper() == "END" or step.fault:
            problems.append(f"injection: action {step.action!r} fault {note!r}")
    else:
        problems.append(f"unknown fault kind {kind}")
    return problems
