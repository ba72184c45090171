"""The typed columns of a folder export (`s3gym export --format jsonl-dir|parquet`): one explicit schema
per record type, the same in every file and every run, and the rows cast to it.

Types are a small vocabulary (`string`, `int64`, `float64`, `bool`, `list<string>`, `list<float64>`)
written into the export's manifest, mapped to Arrow for Parquet (`arrow_schema`), to DuckDB
(`duckdb_columns`) and to Hugging Face `datasets` features (`hf_features`) for the JSONL files. Nested
values (a run's config) are JSON text; timestamps are ISO-8601 text as stored."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any


class ExportFormat(str, Enum):
    """What `s3gym export --format` writes."""

    jsonl = "jsonl"  # one file, one record a line with its "type" (export.py)
    jsonl_dir = "jsonl-dir"  # a folder: one JSONL file per record type
    parquet = "parquet"  # a folder: one Parquet file per record type
    inspect = "inspect"  # one Inspect eval log (.eval or .json) for `inspect view` (export_inspect.py)


STRING, INT, FLOAT, BOOL = "string", "int64", "float64", "bool"
STRINGS, FLOATS = "list<string>", "list<float64>"

SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (
        ("id", STRING), ("game", STRING), ("model", STRING), ("pathway", STRING), ("config", STRING),
        ("status", STRING), ("created_at", STRING), ("note", STRING), ("sweep_id", STRING),
        ("status_reason", STRING)),
    "episodes": (
        ("id", STRING), ("run_id", STRING), ("game", STRING), ("mode", STRING), ("phase", STRING),
        ("seed", INT), ("index", INT), ("checkpoint", INT), ("model", STRING), ("pathway", STRING),
        ("status", STRING), ("score", FLOAT), ("n_steps", INT), ("summary_id", STRING),
        ("history_episode_ids", STRINGS), ("history_cut", INT), ("fork_of", STRING), ("fork_step", INT),
        ("experience_run_id", STRING), ("experience_x", INT), ("experience_source", STRING),
        ("started_at", STRING), ("finished_at", STRING)),
    "steps": (
        ("episode_id", STRING), ("index", INT), ("observation", STRING),
        ("prompt_part_ids", STRINGS),  # the prompt as the concatenation of these prompt_parts, in order
        ("prompt", STRING),  # the messages as sent (JSON text), with --full-prompts instead of the ids
        ("reply", STRING), ("action", STRING), ("self_score", FLOAT), ("reward", FLOAT),
        ("feedback", STRING), ("valid", BOOL), ("terminated", BOOL), ("truncated", BOOL),
        ("actor", STRING), ("proposed_action", STRING), ("fault", STRING), ("tokens_in", INT),
        ("tokens_out", INT), ("tokens_cached", INT), ("tokens_cache_write", INT), ("latency_ms", FLOAT),
        ("cost", FLOAT), ("created_at", STRING)),
    "prompt_parts": (("id", STRING), ("text", STRING)),
    "summaries": (
        ("id", STRING), ("run_id", STRING), ("game", STRING), ("version", INT), ("retain", STRING),
        ("avoid", STRING), ("next", STRING), ("source_episode_ids", STRINGS), ("status", STRING),
        ("pinned", BOOL), ("author", STRING), ("parent_version", INT), ("created_at", STRING),
        ("for_episode_id", STRING), ("tokens_in", INT), ("tokens_out", INT), ("cost", FLOAT)),
    "checkpoints": (
        ("run_id", STRING), ("x", INT), ("episode_ids", STRINGS), ("scores", FLOATS), ("mean", FLOAT)),
    "annotations": (
        ("id", INT), ("kind", STRING), ("target", STRING), ("episode_id", STRING), ("step_index", INT),
        ("summary_id", STRING), ("label", STRING), ("note", STRING), ("correction", STRING),
        ("author", STRING), ("created_at", STRING)),
}

_CAST = {STRING: lambda v: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False),
         INT: int, FLOAT: float, BOOL: bool,
         STRINGS: lambda v: [str(x) for x in v], FLOATS: lambda v: [float(x) for x in v]}


def typed_row(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """`record` reduced to the columns of `kind`, each value cast to its declared type (None stays None)."""
    return {name: None if record.get(name) is None else _CAST[type_](record[name])
            for name, type_ in SCHEMAS[kind]}


def arrow_schema(kind: str):
    """The Arrow schema of a record type (pyarrow: the `export` extra)."""
    import pyarrow as pa

    arrow = {STRING: pa.string(), INT: pa.int64(), FLOAT: pa.float64(), BOOL: pa.bool_(),
             STRINGS: pa.list_(pa.string()), FLOATS: pa.list_(pa.float64())}
    return pa.schema([pa.field(name, arrow[type_]) for name, type_ in SCHEMAS[kind]])


def duckdb_columns(kind: str) -> dict[str, str]:
    """The `columns` argument of DuckDB's read_json for a record type's JSONL file."""
    duck = {STRING: "VARCHAR", INT: "BIGINT", FLOAT: "DOUBLE", BOOL: "BOOLEAN", STRINGS: "VARCHAR[]",
            FLOATS: "DOUBLE[]"}
    return {name: duck[type_] for name, type_ in SCHEMAS[kind]}


def hf_features(kind: str):
    """The Hugging Face `datasets` Features of a record type (for load_dataset("json", features=...))."""
    from datasets import Features, List, Value

    hf = {STRING: Value("string"), INT: Value("int64"), FLOAT: Value("float64"), BOOL: Value("bool"),
          STRINGS: List(Value("string")), FLOATS: List(Value("float64"))}
    return Features({name: hf[type_] for name, type_ in SCHEMAS[kind]})
