"""The s3gym store: one SQLite file (WAL) of runs, episodes, steps, versioned summaries,
checkpoints, training datasets and trainings. One Store per thread (see connection.py).

A Store is its Connection plus one repository per group of tables (each in its own file, its
docstring naming the tables it reads and writes): `store.runs.get_run(id)`,
`store.episodes.steps(id)`, ... A function that needs one or two of them takes those.

The held-out line is enforced here (see LeakageError): an evaluation episode never becomes history,
a summary source or a training row, and an episode's phase always matches its seed range.
"""

from __future__ import annotations

import os
from typing import Any

from s3gym_tui.store.annotations import Annotations
from s3gym_tui.store.aspire import Aspire
from s3gym_tui.store.checkpoints import Checkpoints
from s3gym_tui.store.connection import Connection, default_db_path
from s3gym_tui.store.credit import Credit
from s3gym_tui.store.datasets import Datasets
from s3gym_tui.store.episodes import Episodes
from s3gym_tui.store.hygiene import Hygiene
from s3gym_tui.store.leases import Leases
from s3gym_tui.store.meta import Meta
from s3gym_tui.store.prompt_texts import Prompts
from s3gym_tui.store.runs import Runs
from s3gym_tui.store.search import Search
from s3gym_tui.store.summaries import Summaries
from s3gym_tui.store.sweeps import Sweeps
from s3gym_tui.store.trainings import Trainings

__all__ = ["Store", "default_db_path"]


class Store(Connection):
    """All persistence of s3gym, as repositories over this one connection; they return the pydantic
    models of `s3gym_tui.models` and `store.records`.

    Store(path=None, *, read_only=False, check=True, busy_timeout=10.0): see Connection.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self.runs = Runs(self)
        self.prompts = Prompts(self)
        self.summaries = Summaries(self)
        self.episodes = Episodes(self, self.prompts, self.summaries)
        self.checkpoints = Checkpoints(self)
        self.datasets = Datasets(self)
        self.trainings = Trainings(self)
        self.sweeps = Sweeps(self, self.runs)
        self.leases = Leases(self)
        self.hygiene = Hygiene(self)
        self.annotations = Annotations(self)
        self.search = Search(self, self.hygiene)
        self.credit = Credit(self)
        self.aspire = Aspire(self)
        self.meta = Meta(self)
