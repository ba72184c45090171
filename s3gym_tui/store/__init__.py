"""SQLite persistence of s3gym (runs, episodes, steps, versioned summaries, checkpoints, datasets)
and the held-out guard; no UI imports here. One Store per thread: see `store.py`."""

from s3gym_tui.store.sqlite_import import import_sqlite_utils

import_sqlite_utils()  # before any module of the store imports it: without pandas and numpy  # noqa: E402
from s3gym_tui.store.audit import AuditReport, Finding, audit
from s3gym_tui.store.errors import LeakageError, StoreError
from s3gym_tui.store.records import (Dataset, DatasetRow, ExpertRef, LossPoint, Study, Training,
                                     TrainingCheckpoint, TrainingSource)
from s3gym_tui.store.schema import SCHEMA_VERSION
from s3gym_tui.store.store import Store, default_db_path

__all__ = [
    "Store", "StoreError", "LeakageError", "default_db_path", "audit", "AuditReport", "Finding",
    "Dataset", "DatasetRow", "SCHEMA_VERSION", "Training", "TrainingCheckpoint", "TrainingSource",
    "LossPoint", "Study", "ExpertRef",
]
