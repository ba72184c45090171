"""JSONL export of a run: one `run` line, then each episode followed by its steps."""

from __future__ import annotations

import json
from typing import TextIO

from s3gym_tui.models import Run
from s3gym_tui.secrets import redact_values


def export_run(store, run: Run, out: TextIO) -> int:
    """Write the run as JSONL from one consistent read snapshot (a live run writing meanwhile
    cannot tear it); returns the number of lines written. Secret values are redacted."""
    with store.snapshot("export a run"):
        run = store.get_run(run.id)
        return _export(store, run, out)


def _export(store, run: Run, out: TextIO) -> int:
    lines = 0

    def emit(kind: str, payload: dict) -> None:
        nonlocal lines
        out.write(redact_values(json.dumps({"type": kind, **payload}, ensure_ascii=False)) + "\n")
        lines += 1

    emit("run", run.model_dump(mode="json"))
    for episode in sorted(store.episodes(run.id), key=lambda e: (e.phase, e.checkpoint or 0, e.index)):
        emit("episode", episode.model_dump(mode="json"))
        for step in store.steps(episode.id):  # prompts as sent: shared parts expanded
            emit("step", {**step.model_dump(mode="json"), "prompt": store.prompt_of(step)})
    for summary in store.summaries(run.id):
        emit("summary", summary.model_dump(mode="json"))
    for checkpoint in store.checkpoints(run.id):
        emit("checkpoint", {**checkpoint.model_dump(mode="json"), "mean": checkpoint.mean})
    return lines
