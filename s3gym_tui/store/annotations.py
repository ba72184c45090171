"""Annotations: a label and a note a person (or a script) puts on a step, an episode or a summary
version, with who and when, and for a step optionally the action it should have taken (a correction
`s3gym dataset --corrections` can train on). Searchable through the index (search_schema.py)."""

from __future__ import annotations

import re
import sqlite3
from typing import Any, Iterable, Literal, Optional, Sequence

from pydantic import Field

from s3gym_tui.authors import author_problem
from s3gym_tui.models import DEFAULT_LABELS, Frozen, int64_problem, utcnow, whole_number  # noqa: F401 (re-exported)
from s3gym_tui.secrets import redact_values
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.rows import from_row

AnnotationKind = Literal["step", "episode", "summary"]
MAX_LABEL_CHARS = 40
MAX_NOTE_CHARS = 4000
MAX_CORRECTION_CHARS = 1000
_LABEL = re.compile(r"^[\w?!.+-]+$")
_COLS = ("id", "kind", "episode_id", "step_index", "summary_id", "label", "note", "correction", "author",
         "created_at")


def annotation_target(kind: str, episode_id, step_index, summary_id) -> str:
    """What an annotation is on, as `s3gym annotate` takes it: EPISODE#STEP, EPISODE or summary:ID."""
    if kind == "step":
        return f"{episode_id}#{step_index}"
    if kind == "episode":
        return str(episode_id)
    return f"summary:{summary_id}"


class Annotation(Frozen):
    """One label (and note) on a step, an episode or a summary version."""

    id: int = 0
    kind: AnnotationKind
    episode_id: Optional[str] = None
    step_index: Optional[int] = Field(None, ge=0)
    summary_id: Optional[str] = None
    label: str
    note: str = ""
    correction: Optional[str] = None  # the action the step should have taken (steps only)
    author: str
    created_at: str = Field(default_factory=utcnow)

    @property
    def target(self) -> str:
        """What it is on, as typed on the command line: EPISODE#STEP, EPISODE or summary:ID."""
        return annotation_target(self.kind, self.episode_id, self.step_index, self.summary_id)


def label_problem(label: str, allowed: Optional[Sequence[str]] = None) -> Optional[str]:
    """Why `label` cannot be used (None when it can): one word, known to the config when a list is given."""
    if not label or len(label) > MAX_LABEL_CHARS or not _LABEL.match(label):
        return (f"label {label!r} must be one word of letters, digits or ?!.+-_ "
                f"(at most {MAX_LABEL_CHARS} characters)")
    if allowed is not None and label not in allowed:
        return (f"unknown label {label!r}: one of {', '.join(allowed)} (add labels to the config's "
                f"`labels` list)")
    return None


def parse_target(text: str) -> tuple[AnnotationKind, Optional[str], Optional[int], Optional[str]]:
    """'EPISODE#STEP' (the stored step index, from 0), 'EPISODE' or 'summary:ID' -> (kind, episode_id, step_index, summary_id); StoreError when malformed."""
    text = text.strip()
    if text.startswith("summary:"):
        summary = text.removeprefix("summary:").strip()
        if not summary:
            raise StoreError("name a summary after summary:")
        return "summary", None, None, summary
    episode, sep, step = text.rpartition("#")
    if sep:
        index = whole_number(step)
        if not episode or index is None:
            raise StoreError(f"{text!r} is not EPISODE#STEP (a step index from 0)")
        if int64_problem(index):
            raise StoreError(f"{text!r}: step index {int64_problem(index)}")
        return "step", episode, index, None
    if not text:
        raise StoreError("name what to annotate: EPISODE#STEP, EPISODE or summary:ID")
    return "episode", text, None, None


class Annotations(Repository):
    """Adding, listing and removing annotations. Reads and writes `annotations`; reads `episodes`,
    `steps`, `summaries` (an annotation's target must exist)."""

    def add_annotation(self, kind: AnnotationKind, label: str, *, author: str, note: str = "",
                       episode_id: Optional[str] = None, step_index: Optional[int] = None,
                       summary_id: Optional[str] = None, correction: Optional[str] = None,
                       labels: Optional[Sequence[str]] = None) -> Annotation:
        """Store an annotation on an existing step, episode or summary version. `labels`: the
        allowed labels (the config's), None to accept any well-formed one. Secret values are
        redacted from the note and the correction."""
        problem = label_problem(label, labels) or author_problem(author)
        if problem:
            raise StoreError(problem)
        note = redact_values(str(note).strip())
        if len(note) > MAX_NOTE_CHARS:
            raise StoreError(f"a note holds at most {MAX_NOTE_CHARS:,} characters (this one {len(note):,})")
        if correction is not None:
            correction = redact_values(" ".join(str(correction).split()))
            if kind != "step":
                raise StoreError("a corrected action goes on a step (EPISODE#STEP)")
            if not correction or len(correction) > MAX_CORRECTION_CHARS:
                raise StoreError(f"a corrected action is 1 to {MAX_CORRECTION_CHARS:,} characters")
        try:
            annotation = Annotation(kind=kind, label=label, note=note, correction=correction, author=author,
                                    episode_id=episode_id if kind != "summary" else None,
                                    step_index=step_index if kind == "step" else None,
                                    summary_id=summary_id if kind == "summary" else None)
        except ValueError as err:
            raise StoreError(f"bad annotation: {' '.join(str(err).split())[:200]}") from err
        with self._db._tx(f"annotate {annotation.target}") as conn:
            self._require_target(conn, annotation)
            cur = conn.execute(
                "INSERT INTO annotations (kind, episode_id, step_index, summary_id, label, note, correction, "
                "author, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (annotation.kind, annotation.episode_id, annotation.step_index, annotation.summary_id,
                 annotation.label, annotation.note, annotation.correction, annotation.author,
                 annotation.created_at))
            annotation = annotation.model_copy(update={"id": int(cur.lastrowid)})
        return annotation

    @staticmethod
    def _require_target(conn: sqlite3.Connection, a: Annotation) -> None:
        if a.kind == "summary":
            if not conn.execute("SELECT 1 FROM summaries WHERE id = ?", (a.summary_id,)).fetchone():
                raise StoreError(f"no summary {a.summary_id!r}")
            return
        if not conn.execute("SELECT 1 FROM episodes WHERE id = ?", (a.episode_id,)).fetchone():
            raise StoreError(f"no episode {a.episode_id!r}")
        if a.kind == "step" and not conn.execute('SELECT 1 FROM steps WHERE episode_id = ? AND "index" = ?',
                                                 (a.episode_id, a.step_index)).fetchone():
            raise StoreError(f"episode {a.episode_id!r} has no step {a.step_index} (steps count from 0)")

    def remove_annotation(self, annotation_id: int) -> Annotation:
        """Remove one annotation by id (returned as it was)."""
        with self._db._tx(f"remove annotation {annotation_id}") as conn:
            rows = self._annotations_where(conn, "id = ?", (int(annotation_id),))
            if not rows:
                raise StoreError(f"no annotation {annotation_id}")
            conn.execute("DELETE FROM annotations WHERE id = ?", (int(annotation_id),))
        return rows[0]

    def list(self, *, episode_id: Optional[str] = None, step_index: Optional[int] = None,
             summary_id: Optional[str] = None, run_id: Optional[str] = None,
             label: Optional[str] = None, kind: Optional[str] = None) -> list[Annotation]:
        """Annotations, oldest first, filtered by what they are on (an episode: its own and its
        steps'; a run: on its episodes, their steps and its summaries) and label."""
        where, params = [], []
        if episode_id is not None:
            where.append("episode_id = ?")
            params.append(episode_id)
        if step_index is not None:
            where.append("step_index = ?")
            params.append(int(step_index))
        if summary_id is not None:
            where.append("summary_id = ?")
            params.append(summary_id)
        if run_id is not None:
            where.append("(episode_id IN (SELECT id FROM episodes WHERE run_id = ?) OR summary_id IN "
                         "(SELECT id FROM summaries WHERE run_id = ?))")
            params += [run_id, run_id]
        if label is not None:
            where.append("label = ?")
            params.append(label)
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        with self._db._reading("read annotations") as conn:
            return self._annotations_where(conn, " AND ".join(where) or "1", params)

    def annotations_of_steps(self, episode_id: str) -> dict[int, list[Annotation]]:
        """An episode's step annotations by step index (for replay and Compare)."""
        found: dict[int, list[Annotation]] = {}
        for a in self.list(episode_id=episode_id, kind="step"):
            found.setdefault(int(a.step_index or 0), []).append(a)
        return found

    def _annotations_where(self, conn: sqlite3.Connection, where: str,
                           params: Sequence[Any]) -> list[Annotation]:
        cursor = conn.execute(f"SELECT {', '.join(_COLS)} FROM annotations WHERE {where} ORDER BY id", params)
        return [from_row(Annotation, dict(zip(_COLS, row)), f"annotation {row[0]}") for row in cursor]

    def annotation_labels(self) -> dict[str, int]:
        """Every label in use with how many annotations carry it."""
        with self._db._reading("count labels") as conn:
            return {r[0]: r[1] for r in conn.execute("SELECT label, count(*) FROM annotations GROUP BY label "
                                                     "ORDER BY label")}


def annotation_json(a: Annotation) -> dict[str, Any]:
    return {**a.model_dump(mode="json"), "target": a.target}


def labels_of(annotations: Iterable[Annotation]) -> str:
    """'mistake, insight' (distinct, in order)."""
    return ", ".join(dict.fromkeys(a.label for a in annotations))


__all__ = ["Annotation", "Annotations", "DEFAULT_LABELS", "label_problem", "parse_target",
           "annotation_json", "labels_of"]
