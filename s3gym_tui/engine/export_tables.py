"""Folder export of a run: one file per record type (runs, episodes, steps, prompt_parts, summaries,
checkpoints, annotations) as JSONL or Parquet, with the typed columns of export_schema.py, and a
manifest (`s3gym-export.json`: the format, the run, each file's rows and column types).

A step lists the ids of its prompt's parts (prompt_parts.py: each distinct part written once), or
with `full_prompts` carries the prompt as sent in `prompt`. The folder is written whole under a
temporary name and renamed: an error leaves the old folder (or none) in place. Secret values are
redacted from every string; JSONL lines write terminal control characters as \\u escapes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.engine.export import records
from s3gym_tui.engine.export_schema import SCHEMAS, ExportFormat, arrow_schema, typed_row
from s3gym_tui.engine.prompt_parts import PromptParts
from s3gym_tui.models import Run
from s3gym_tui.output import OutputError
from s3gym_tui.secrets import redact_values, secret_values
from s3gym_tui.textgate import safe_json

MANIFEST = "s3gym-export.json"
FILES = {"run": "runs", "episode": "episodes", "step": "steps", "summary": "summaries",
         "checkpoint": "checkpoints", "annotation": "annotations"}
BATCH_ROWS = 1000  # rows per Parquet row group write


def _redacted(row: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    """The row with every secret value redacted from its strings (and lists of strings)."""
    if not secrets:
        return row

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact_values(value, secrets)
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return {name: clean(value) for name, value in row.items()}


class _Jsonl:
    def __init__(self, path: Path):
        self.handle = open(path, "w", encoding="utf-8")

    def write(self, row: dict) -> None:
        self.handle.write(safe_json(json.dumps(row, ensure_ascii=False)) + "\n")

    def close(self) -> None:
        self.handle.close()


class _Parquet:
    def __init__(self, path: Path, kind: str):
        import pyarrow.parquet as pq

        self.schema = arrow_schema(kind)
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd")
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self._flush()
        self.writer.close()


def _check_parquet() -> None:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise OutputError("--format parquet needs pyarrow: pip install 's3gym[export]' (nothing was written)") from None


def check_folder(folder: Path, db_path: Optional[Path]) -> Path:
    """The output folder, or OutputError when it is a file, has no parent directory, or holds other
    files than an earlier export (it is replaced whole, never mixed)."""
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        what = "the database" if db_path is not None and folder.resolve() == Path(db_path).resolve() else "a file"
        raise OutputError(f"{folder} is {what}: give a folder for this format (nothing was written)")
    if not folder.parent.is_dir():
        raise OutputError(f"no directory {folder.parent} for {folder.name} (nothing was written)")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MANIFEST).is_file():
        raise OutputError(f"{folder} holds files that are not an s3gym export: choose a new or empty "
                          f"folder (nothing was written)")
    return folder


def export_tables(store, run: Run, folder: Path, fmt: ExportFormat, full_prompts: bool = False) -> dict[str, int]:
    """Write the run into `folder` (created, or an earlier export replaced) from one consistent read
    snapshot; returns the rows written per file."""
    folder = check_folder(folder, store.path)
    if fmt == ExportFormat.parquet:
        _check_parquet()
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".part", dir=folder.parent))
    except OSError as err:
        raise OutputError(f"cannot write in {folder.parent}: {err.strerror or err} (nothing was written)") from err
    try:
        with store.snapshot("export a run"):
            counts = _write(store, store.runs.get_run(run.id), tmp, fmt, full_prompts)
        _replace(tmp, folder)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"cannot write {folder}: {err.strerror or err} (nothing was written)") from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts


def _replace(tmp: Path, folder: Path) -> None:
    """Put the written folder in place of `folder` (absent, empty, or an earlier export)."""
    if folder.is_dir() and any(folder.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".old", dir=folder.parent))
        os.replace(folder, old / folder.name)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, folder)


def _write(store, run: Run, tmp: Path, fmt: ExportFormat, full_prompts: bool) -> dict[str, int]:
    suffix = "parquet" if fmt == ExportFormat.parquet else "jsonl"
    names = [*FILES.values(), "prompt_parts"]
    writers = {name: (_Parquet(tmp / f"{name}.{suffix}", name) if suffix == "parquet"
                      else _Jsonl(tmp / f"{name}.{suffix}")) for name in names}
    counts = dict.fromkeys(names, 0)
    parts = PromptParts()
    secrets = secret_values()

    def emit(name: str, record: dict) -> None:
        writers[name].write(_redacted(typed_row(name, record), secrets))
        counts[name] += 1

    try:
        for kind, payload, stored in records(store, run):
            if kind == "run":
                payload = {**payload, **{k: payload["config"][k] for k in ("game", "model", "pathway")}}
            if kind == "step":
                payload = {**payload, "prompt": None}
                if stored.prompt:  # None for a person's move
                    text = redact_values(store.prompts.prompt_of(stored), secrets)  # as sent: shared parts, deltas expanded
                    if full_prompts:
                        payload["prompt"] = text
                    else:
                        ids, new = parts.split(stored.episode_id, text)
                        payload["prompt_part_ids"] = ids
                        for key, part in new:
                            emit("prompt_parts", {"id": key, "text": part})
            emit(FILES[kind], payload)
    finally:
        for writer in writers.values():
            writer.close()
    manifest = {"format": fmt.value, "run_id": run.id, "full_prompts": full_prompts,
                "files": {name: {"file": f"{name}.{suffix}", "rows": counts[name],
                                 "columns": dict(SCHEMAS[name])} for name in names}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return counts
