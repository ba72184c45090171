"""JSONL export of a run: one `run` line, then each episode followed by its steps (a step's
`prompt` is the list of messages as sent, as JSON), then summaries, checkpoints and the annotations
on the run's episodes, steps and summaries. Characters that
would drive a terminal are written as \\u escapes (the same JSON values: `export RUN` prints safely).
The folder formats (one typed file per record type) are in export_tables.py; both read `records`."""

from __future__ import annotations

import json
from typing import Iterator, Optional, TextIO

from s3gym_tui.models import Run
from s3gym_tui.secrets import redact_values
from s3gym_tui.store.errors import StoreError
from s3gym_tui.textgate import safe_json


def _prompt(store, step) -> Optional[list]:
    """The messages as sent, as JSON (a list of {role, content}); None for a step no model was
    asked for (a person's move)."""
    if not step.prompt:
        return None
    try:
        return json.loads(store.prompts.prompt_of(step))  # shared parts and deltas expanded
    except ValueError as err:
        raise StoreError(f"the stored prompt of step {step.index} of episode {step.episode_id!r} is not "
                         f"JSON; nothing more was exported") from err


def records(store, run: Run) -> Iterator[tuple[str, dict, object]]:
    """(record type, its fields, the stored object) for everything a run export holds, in export
    order: the run, each episode then its steps (prompts not read: a step's `prompt` is its stored
    form), summaries, checkpoints (with their mean) and annotations (with their target)."""
    yield "run", run.model_dump(mode="json"), run
    for episode in sorted(store.episodes.list(run.id), key=lambda e: (e.phase, e.checkpoint or 0, e.index)):
        yield "episode", episode.model_dump(mode="json"), episode
        for step in store.episodes.steps(episode.id):
            yield "step", step.model_dump(mode="json"), step
    for summary in store.summaries.list(run.id):
        yield "summary", summary.model_dump(mode="json"), summary
    for checkpoint in store.checkpoints.list(run.id):
        yield "checkpoint", {**checkpoint.model_dump(mode="json"), "mean": checkpoint.mean}, checkpoint
    for annotation in store.annotations.list(run_id=run.id):  # on its episodes, their steps, its summaries
        yield "annotation", {**annotation.model_dump(mode="json"), "target": annotation.target}, annotation


def export_run(store, run: Run, out: TextIO) -> int:
    """Write the run as JSONL from one consistent read snapshot (a live run writing meanwhile
    cannot tear it); returns the number of lines written. Secret values are redacted."""
    with store.snapshot("export a run"):
        run = store.runs.get_run(run.id)
        return _export(store, run, out)


def _export(store, run: Run, out: TextIO) -> int:
    lines = 0
    for kind, payload, stored in records(store, run):
        if kind == "step":  # prompts as sent: shared parts expanded
            payload = {**payload, "prompt": _prompt(store, stored)}
        out.write(safe_json(redact_values(json.dumps({"type": kind, **payload}, ensure_ascii=False))) + "\n")
        lines += 1
    return lines
