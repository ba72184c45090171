"""Property test (Hypothesis): search with any combination of words and filters returns exactly the
steps a plain reference finds (every row read with plain SQL, every filter checked in Python)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3gym_tui.models import RunConfig, SweepConfig
from s3gym_tui.store import Store
from s3gym_tui.store.search import SearchFilters

from tests.store.conftest import make_episode, make_step

WORDS = ("left", "right", "grudge", "column", "mine", "flag", "safe", "corner", "trust", "cheat")
FAULTS = (None, None, "missing self-score (no 'Score:' on the answer line)", "timeout; retried")
LABELS = ("mistake", "lucky", "insight")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def populated(tmp_path_factory) -> Path:
    """Three runs (two games, sweeps, pathways), exploration and evaluation episodes, a fork, steps
    with random words, scores and faults, annotations on steps and episodes."""
    path = tmp_path_factory.mktemp("search") / "s3gym.db"
    rng = random.Random(7)
    with Store(path) as store:
        _, runs = store.sweeps.create_sweep(
            SweepConfig(games=("trust",), pathways=("summary", "history"), models=("m1", "m2")),
            runs=[RunConfig(model="m1", game="trust", pathway="summary"),
                  RunConfig(model="m2", game="trust", pathway="history")], sweep_id="sweep-t")
        runs.append(store.runs.create_run(RunConfig(model="m1", game="minesweeper", pathway="none")))
        episodes = []
        for run in runs:
            for i in range(3):
                phase = "eval" if i == 2 else "explore"
                ep = store.episodes.add_episode(make_episode(run, phase=phase, index=i, checkpoint=0 if phase == "eval"
                                                             else None))
                episodes.append(ep)
        fork = store.episodes.add_episode(make_episode(runs[0], index=0, fork_of=episodes[0].id, fork_step=2,
                                                       seed=episodes[0].seed, id="fork-0"))
        episodes.append(fork)
        for ep in episodes:
            steps = []
            for i in range(rng.randint(3, 9)):
                s = rng.choice([None, -1.0, 0.0, 0.5, 2.0])
                steps.append(make_step(ep.id, i, action=rng.choice(WORDS), reply=_text(rng, 4),
                                       feedback=_text(rng, 2), observation=_text(rng, 3), self_score=s,
                                       reward=rng.choice([-1.0, 0.0, 1.0, 3.0]), fault=rng.choice(FAULTS),
                                       actor=rng.choice(["model", "model", "human", "human-edit"])))
            store.episodes.add_steps(steps)
            for step in steps:
                if rng.random() < 0.2:
                    store.annotations.add_annotation("step", rng.choice(LABELS), author="human:t", note=_text(rng, 2),
                                                     episode_id=ep.id, step_index=step.index)
            if rng.random() < 0.3:
                store.annotations.add_annotation("episode", rng.choice(LABELS), author="human:t", note=_text(rng, 1),
                                                 episode_id=ep.id)
            if rng.random() < 0.5:
                store.episodes.finish_episode(ep.id, 1.0)  # indexes its steps; the others wait for a search
        assert store.search.search_backlog() > 0
        store.search.find("left")  # a writable store's search indexes what waits (the test reads read-only)
        assert store.search.search_backlog() == 0
    return path


def _reference(path: Path, words: list[str], neg: list[str], f: SearchFilters) -> set[str]:
    """Every step read with plain SQL; words and filters checked in Python, one by one."""
    import sqlite3

    conn = sqlite3.connect(path)
    rows = conn.execute('SELECT s.episode_id, s."index", s.action, s.reply, s.feedback, s.observation, '
                        's.self_score, s.reward, s.fault, s.actor, e.game, e.run_id, e.model, e.pathway, '
                        'e.phase, e.fork_of, e.fork_step, r.sweep_id FROM steps s JOIN episodes e ON '
                        'e.id = s.episode_id LEFT JOIN runs r ON r.id = e.run_id').fetchall()
    notes: dict[tuple, list[tuple[str, str]]] = {}
    for kind, episode_id, index, label, note in conn.execute(
            "SELECT kind, episode_id, step_index, label, note FROM annotations"):
        notes.setdefault((kind, episode_id, index), []).append((label, note))
    conn.close()

    def tokens(text: str) -> set[str]:
        return set(re.findall(r"\w+", (text or "").lower()))

    def doc_matches(doc: set[str]) -> bool:
        return all(w in doc for w in words) and not any(n in doc for n in neg)

    found = set()
    for (episode_id, index, action, reply, feedback, observation, s, r, fault, actor, game, run_id, model,
         pathway, phase, fork_of, fork_step, sweep_id) in rows:
        if words:
            fields = {"action": action, "reply": reply, "feedback": feedback, "observation": observation}
            chosen = [v for k, v in fields.items() if not f.fields or k in f.fields]
            doc = set().union(*(tokens(v) for v in chosen)) if chosen else set()
            own_notes = notes.get(("step", episode_id, index), [])
            by_note = (not f.fields or "note" in f.fields) and any(
                doc_matches(tokens(f"{label} {note}")) for label, note in own_notes)
            if not ((chosen and doc_matches(doc)) or by_note):
                continue
        if f.games and game not in f.games or f.runs and run_id not in f.runs:
            continue
        if f.models and model not in f.models or f.pathways and pathway not in f.pathways:
            continue
        if f.sweeps and sweep_id not in f.sweeps or f.phases and phase not in f.phases:
            continue
        if f.verdicts:
            v = ("missing" if s is None else "agree" if (s > 0) == (r > 0) else "over" if s > 0 else "under")
            if v not in f.verdicts:
                continue
        if f.self_min is not None and (s is None or s < f.self_min):
            continue
        if f.self_max is not None and (s is None or s > f.self_max):
            continue
        if f.reward_min is not None and r < f.reward_min or f.reward_max is not None and r > f.reward_max:
            continue
        if f.faults:
            ok = False
            for kind in f.faults:
                ok |= (kind == "any" and bool(fault)) or (kind == "none" and not fault) or (
                    kind not in ("any", "none") and fault is not None and kind.lower() in fault.lower())
            if not ok:
                continue
        if f.actors and actor not in f.actors:
            continue
        if f.forks is True and (fork_of is None or index < (fork_step or 0)):
            continue
        if f.forks is False and fork_of is not None:
            continue
        if f.labels:
            labels = [lab for lab, _ in notes.get(("step", episode_id, index), [])]
            labels += [lab for lab, _ in notes.get(("episode", episode_id, None), [])]
            if not labels or ("any" not in f.labels and not set(labels) & set(f.labels)):
                continue
        found.add(f"{episode_id}#{index}")
    return found


def _some(values):
    """Mostly no filter (so the ones drawn are not always hidden behind an empty result)."""
    return st.one_of(st.just(()), st.just(()), st.just(()),
                     st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True).map(tuple))


_score = st.one_of(st.none(), st.none(), st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]))
filters = st.builds(
    SearchFilters,
    games=_some(["trust", "minesweeper"]), models=_some(["m1", "m2"]), sweeps=_some(["sweep-t", "other"]),
    pathways=_some(["none", "history", "summary"]), phases=_some(["explore", "eval"]),
    verdicts=_some(["agree", "over", "under", "missing"]),
    self_min=_score, reward_max=_score,
    faults=_some(["any", "none", "missing", "timeout"]),
    actors=_some(["model", "human", "human-edit"]),
    forks=st.sampled_from([None, None, True, False]),
    labels=_some(["mistake", "lucky", "any"]),
    fields=_some(["action", "reply", "feedback", "observation", "note"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), max_size=2, unique=True),
       neg=st.lists(st.sampled_from(WORDS), max_size=1), f=filters)
def test_search_equals_the_plain_reference(populated: Path, words, neg, f: SearchFilters):
    if f.self_min is not None and f.self_max is not None and f.self_min > f.self_max:
        return
    if not words:
        neg = []
    query = " ".join(words + [f"-{n}" for n in neg])
    with Store(populated, read_only=True) as store:
        if not query and f == SearchFilters(fields=f.fields):
            return
        result = store.search.find(query, f, limit=10_000)
    got = {h.target for h in result.hits if h.kind == "step"}
    assert not result.more
    assert got == _reference(populated, words, neg, f)
