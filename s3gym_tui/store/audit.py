"""Leakage audit: finds held-out violations in the tables themselves, including rows written around
the store's guards (raw SQL, other tools). Clean data gives an empty report."""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Optional

from pydantic import BaseModel, ConfigDict, Field

from s3gym_tui.models import EVAL_SEED_BASE

if TYPE_CHECKING:
    from s3gym_tui.store.store import Store

# An episode counts as evaluation data when its phase, its mode or its seed says so.
_IS_EVAL = "(s.phase = 'eval' OR s.mode = 'eval' OR s.seed >= :base)"


def _ids(column: str) -> str:
    """json_each over a JSON id list that tolerates malformed text (reported separately)."""
    return f"json_each(CASE WHEN json_valid({column}) THEN {column} ELSE '[]' END)"


class Finding(BaseModel):
    """One problem: which episode, which run, and what is wrong (one line)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    episode_id: Optional[str] = None
    run_id: Optional[str] = None
    other_id: Optional[str] = None  # the summary / episode / dataset that uses it
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class AuditReport(BaseModel):
    """Findings by kind; `ok` is True when there are none."""

    eval_in_history: list[Finding] = Field(default_factory=list)
    eval_in_summary_sources: list[Finding] = Field(default_factory=list)
    eval_summary_producer: list[Finding] = Field(default_factory=list)
    eval_in_dataset: list[Finding] = Field(default_factory=list)
    eval_in_training: list[Finding] = Field(default_factory=list)
    eval_in_training_pi: list[Finding] = Field(default_factory=list)
    seed_in_both_phases: list[Finding] = Field(default_factory=list)
    phase_seed_mismatch: list[Finding] = Field(default_factory=list)
    mode_phase_mismatch: list[Finding] = Field(default_factory=list)
    dangling_references: list[Finding] = Field(default_factory=list)
    malformed_json: list[Finding] = Field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for name in type(self).model_fields for f in getattr(self, name)]

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        return [str(f) for f in self.problems] or ["audit: no leakage found"]


_HISTORY = f"""
SELECT e.id, e.run_id, h.value, s.id IS NULL AS dangling
FROM episodes e, {_ids('e.history_episode_ids')} h LEFT JOIN episodes s ON s.id = h.value
WHERE s.id IS NULL OR {_IS_EVAL}"""

_SUMMARY_SOURCES = f"""
SELECT m.id, m.run_id, h.value, s.id IS NULL AS dangling
FROM summaries m, {_ids('m.source_episode_ids')} h LEFT JOIN episodes s ON s.id = h.value
WHERE s.id IS NULL OR {_IS_EVAL}"""

# for_episode_id may name an episode never stored (the summary for the last checkpoint's state,
# or a run stopped between writing a summary and starting its episode): only eval ones count.
_SUMMARY_PRODUCER = f"""
SELECT m.id, m.run_id, m.for_episode_id, 0 AS dangling
FROM summaries m JOIN episodes s ON s.id = m.for_episode_id
WHERE {_IS_EVAL}"""

_DATASET = f"""
SELECT r.dataset_id, d.run_id, r.episode_id, s.id IS NULL AS dangling, count(*) AS n
FROM dataset_rows r LEFT JOIN datasets d ON d.id = r.dataset_id
LEFT JOIN episodes s ON s.id = r.episode_id
WHERE s.id IS NULL OR {_IS_EVAL}
GROUP BY r.dataset_id, r.episode_id"""

# Trainings (experts, distillation students): their rollout seeds, prompt episodes and datasets.
_TRAINING_SOURCES = f"""
SELECT t.training_id, t.kind, t.ref, t.seed, t.mode, s.id IS NULL AND t.kind = 'prompt' AS dangling,
       CASE WHEN t.kind = 'prompt' THEN coalesce({_IS_EVAL}, 0) ELSE 0 END AS eval_episode
FROM training_sources t LEFT JOIN episodes s ON t.kind = 'prompt' AND s.id = t.ref
WHERE t.seed >= :base OR t.mode = 'eval' OR (t.kind = 'prompt' AND (s.id IS NULL OR {_IS_EVAL}))
   OR (t.kind = 'dataset' AND NOT EXISTS (SELECT 1 FROM datasets d WHERE d.id = t.ref))"""

_TRAINING_DATASETS = f"""
SELECT t.id, t.dataset_id, r.episode_id, count(*) FROM trainings t
JOIN dataset_rows r ON r.dataset_id = t.dataset_id JOIN episodes s ON s.id = r.episode_id
WHERE r.kind != 'dropped' AND {_IS_EVAL} GROUP BY t.id, r.episode_id"""

# PI (credit per action) made for training, or credit a training used: every episode it read or cites,
# and the credited episode itself, must be exploration data.
_TRAINING_PI = f"""
SELECT x.id, 'read', j.value, s.id IS NULL AS dangling FROM pi_extractions x, {_ids('x.episode_ids')} j
LEFT JOIN episodes s ON s.id = j.value
WHERE (x.purpose = 'training' OR x.id IN (SELECT extraction_id FROM episode_credits WHERE training_id IS NOT NULL))
  AND (s.id IS NULL OR {_IS_EVAL})
UNION ALL
SELECT i.extraction_id, 'cite', v.episode_id, 0 FROM pi_evidence v JOIN pi_items i ON i.id = v.item_id
JOIN pi_extractions x ON x.id = i.extraction_id JOIN episodes s ON s.id = v.episode_id
WHERE (x.purpose = 'training' OR x.id IN (SELECT extraction_id FROM episode_credits WHERE training_id IS NOT NULL))
  AND {_IS_EVAL}
UNION ALL
SELECT c.training_id, 'credit', c.episode_id, 0 FROM episode_credits c JOIN episodes s ON s.id = c.episode_id
WHERE c.training_id IS NOT NULL AND {_IS_EVAL}"""

_BOTH_PHASES = """
SELECT run_id, seed, group_concat(DISTINCT phase), count(*) FROM episodes
WHERE run_id IS NOT NULL GROUP BY run_id, seed HAVING count(DISTINCT phase) > 1"""

_PHASE_SEED = """
SELECT id, run_id, phase, seed FROM episodes
WHERE phase IS NOT CASE WHEN seed >= :base THEN 'eval' ELSE 'explore' END"""

_MODE_PHASE = """
SELECT id, run_id, mode, phase FROM episodes WHERE run_id IS NOT NULL AND mode IS NOT phase"""

_MALFORMED = """
SELECT 'episodes', id, run_id, 'history_episode_ids' FROM episodes
  WHERE NOT json_valid(history_episode_ids) OR json_type(history_episode_ids) != 'array'
UNION ALL
SELECT 'summaries', id, run_id, 'source_episode_ids' FROM summaries
  WHERE NOT json_valid(source_episode_ids) OR json_type(source_episode_ids) != 'array'"""


def audit_connection(conn: sqlite3.Connection) -> AuditReport:
    """Run every check on an open connection to an s3gym database."""
    p = {"base": EVAL_SEED_BASE}
    report = AuditReport()

    def rows(sql: str) -> list[tuple]:
        return conn.execute(sql, p).fetchall()

    for episode_id, run_id, source, dangling in rows(_HISTORY):
        if dangling:
            report.dangling_references.append(Finding(
                kind="dangling_reference", episode_id=source, run_id=run_id, other_id=episode_id,
                detail=f"episode {episode_id!r} lists unknown history episode {source!r}"))
        else:
            report.eval_in_history.append(Finding(
                kind="eval_in_history", episode_id=source, run_id=run_id, other_id=episode_id,
                detail=f"evaluation episode {source!r} is history of episode {episode_id!r}"))
    for summary_id, run_id, source, dangling in rows(_SUMMARY_SOURCES):
        if dangling:
            report.dangling_references.append(Finding(
                kind="dangling_reference", episode_id=source, run_id=run_id, other_id=summary_id,
                detail=f"summary {summary_id!r} lists unknown source episode {source!r}"))
        else:
            report.eval_in_summary_sources.append(Finding(
                kind="eval_in_summary_sources", episode_id=source, run_id=run_id,
                other_id=summary_id,
                detail=f"evaluation episode {source!r} is a source of summary {summary_id!r}"))
    for summary_id, run_id, episode_id, _ in rows(_SUMMARY_PRODUCER):
        report.eval_summary_producer.append(Finding(
            kind="eval_summary_producer", episode_id=episode_id, run_id=run_id,
            other_id=summary_id,
            detail=f"summary {summary_id!r} was produced for evaluation episode {episode_id!r}"))
    for dataset_id, run_id, episode_id, dangling, n in rows(_DATASET):
        if dangling:
            report.dangling_references.append(Finding(
                kind="dangling_reference", episode_id=episode_id, run_id=run_id,
                other_id=dataset_id,
                detail=f"dataset {dataset_id!r} has {n} row(s) from unknown episode "
                       f"{episode_id!r}"))
        else:
            report.eval_in_dataset.append(Finding(
                kind="eval_in_dataset", episode_id=episode_id, run_id=run_id, other_id=dataset_id,
                detail=f"dataset {dataset_id!r} has {n} row(s) from evaluation episode "
                       f"{episode_id!r}"))
    for training_id, kind, ref, seed, mode, dangling, eval_episode in rows(_TRAINING_SOURCES):
        if kind == "dataset" or dangling:
            report.dangling_references.append(Finding(
                kind="dangling_reference", episode_id=ref if kind == "prompt" else None, other_id=training_id,
                detail=f"training {training_id!r} lists unknown {'dataset' if kind == 'dataset' else 'episode'} "
                       f"{ref!r} as a {kind} source"))
            continue
        where = (f"evaluation episode {ref!r}" if eval_episode else
                 f"evaluation seed {seed}" if seed is not None and seed >= EVAL_SEED_BASE else f"mode {mode!r}")
        report.eval_in_training.append(Finding(
            kind="eval_in_training", episode_id=ref if kind == "prompt" else None, other_id=training_id,
            detail=f"training {training_id!r} has a {kind} source on {where}"))
    for training_id, dataset_id, episode_id, n in rows(_TRAINING_DATASETS):
        report.eval_in_training.append(Finding(
            kind="eval_in_training", episode_id=episode_id, other_id=training_id,
            detail=f"training {training_id!r} trained on {n} row(s) of evaluation episode {episode_id!r} "
                   f"(dataset {dataset_id!r})"))
    has_pi = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'pi_extractions'").fetchone()
    for owner, how, episode_id, dangling in (rows(_TRAINING_PI) if has_pi else ()):
        if dangling:
            report.dangling_references.append(Finding(
                kind="dangling_reference", episode_id=episode_id, other_id=owner,
                detail=f"PI extraction {owner!r} lists unknown episode {episode_id!r}"))
            continue
        detail = {"read": f"training PI extraction {owner!r} read evaluation episode {episode_id!r}",
                  "cite": f"training PI extraction {owner!r} cites evaluation episode {episode_id!r} as evidence",
                  "credit": f"training {owner!r} used the credit of evaluation episode {episode_id!r}"}[how]
        report.eval_in_training_pi.append(Finding(kind="eval_in_training_pi", episode_id=episode_id,
                                                  other_id=owner, detail=detail))
    for run_id, seed, phases, n in rows(_BOTH_PHASES):
        report.seed_in_both_phases.append(Finding(
            kind="seed_in_both_phases", run_id=run_id,
            detail=f"run {run_id!r} uses seed {seed} in phases {phases} ({n} episodes)"))
    for episode_id, run_id, phase, seed in rows(_PHASE_SEED):
        report.phase_seed_mismatch.append(Finding(
            kind="phase_seed_mismatch", episode_id=episode_id, run_id=run_id,
            detail=f"episode {episode_id!r} is phase {phase!r} on seed {seed} "
                   f"(evaluation seeds are >= {EVAL_SEED_BASE})"))
    for episode_id, run_id, mode, phase in rows(_MODE_PHASE):
        report.mode_phase_mismatch.append(Finding(
            kind="mode_phase_mismatch", episode_id=episode_id, run_id=run_id,
            detail=f"episode {episode_id!r} of run {run_id!r} has mode {mode!r} but phase "
                   f"{phase!r}"))
    for table, row_id, run_id, column in rows(_MALFORMED):
        report.malformed_json.append(Finding(
            kind="malformed_json", run_id=run_id, other_id=row_id,
            detail=f"{table} {row_id!r}: {column} is not a JSON list"))
    return report


def audit(store: "Store | str | os.PathLike[str]") -> AuditReport:
    """Audit a Store (or the database at a path, opened read-only) for held-out leakage."""
    from s3gym_tui.store.store import Store  # noqa: F811 - runtime import (cycle)

    if isinstance(store, Store):
        conn = store._live("audit the database")
        try:
            return audit_connection(conn)
        except sqlite3.Error as err:
            raise store._wrap(err, "audit the database") from err
    with Store(store, read_only=True) as opened:
        return audit(opened)


__all__ = ["AuditReport", "Finding", "audit", "audit_connection"]
