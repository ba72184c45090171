"""`s3gym search`, `s3gym annotate` and `s3gym annotations` as a person types them, checked against the
store: filters hold for every hit, annotations round-trip, an older file is upgraded (backup) and
indexed with progress, divergences of Compare pairs are found, bad input is one line."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.store import Store
from tests.store.conftest import make_episode, make_step
from tests.store.old_schema import as_older_code

TINY = ["--episodes", "3", "--eval-every", "3", "--eval-episodes", "1", "--progress", "none"]


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def played(tmp_path, capsys, monkeypatch) -> str:
    monkeypatch.setenv("S3GYM_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("USER", "ann")
    db = str(tmp_path / "s.db")
    assert run_cli(capsys, "run", "trust", "-m", "scripted/trust", "-p", "summary", *TINY, "--db", db)[0] == 0
    return db


def test_words_and_filters_hold_for_every_hit(played: str, capsys):
    code, out, err = run_cli(capsys, "search", "opponent", "cheat", "--phase", "eval", "--verdict", "over",
                             "--limit", "200", "--json", "--db", played)
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert hits
    with Store(played) as store:
        for hit in hits:
            episode = store.episodes.get_episode(hit["episode_id"])
            step = store.episodes.steps(episode.id)[hit["step_index"]]
            assert episode.phase == "eval"
            assert step.self_score is not None and step.self_score > 0 >= step.reward
            text = " ".join((step.action, step.reply, step.feedback, step.observation)).lower()
            assert "opponent" in text and "cheat" in text
        every = [(e.id, s.index) for e in store.episodes.list() if e.phase == "eval"
                 for s in store.episodes.steps(e.id) if s.self_score and s.self_score > 0 >= s.reward
                 and "cheat" in (s.action + s.reply + s.feedback + s.observation).lower()
                 and "opponent" in (s.action + s.reply + s.feedback + s.observation).lower()]
    assert sorted((h["episode_id"], h["step_index"]) for h in hits) == sorted(every)
    code, out, _ = run_cli(capsys, "search", "opponent", "cheat", "--phase", "eval", "--limit", "2", "--db", played)
    assert code == 0 and "more: raise --limit" in out and "#" in out


def test_annotate_search_list_and_remove(played: str, capsys):
    hit = json.loads(run_cli(capsys, "search", "cheat", "--limit", "1", "--json", "--db", played)[1])["hits"][0]
    code, out, err = run_cli(capsys, "annotate", hit["target"], "mistake", "--note", "walked into the grudge",
                             "--correct", "collaborate", "--json", "--db", played)
    assert code == 0, err
    made = json.loads(out)
    assert made["author"] == "human:ann" and made["correction"] == "collaborate" and made["target"] == hit["target"]
    found = json.loads(run_cli(capsys, "search", "grudge", "--json", "--db", played)[1])["hits"]
    assert [(h["target"], h["labels"]) for h in found] == [(hit["target"], ["mistake"])]
    labelled = json.loads(run_cli(capsys, "search", "--label", "mistake", "--json", "--db", played)[1])["hits"]
    assert [h["target"] for h in labelled] == [hit["target"]]
    listed = json.loads(run_cli(capsys, "annotations", "--json", "--db", played)[1])
    assert [a["id"] for a in listed] == [made["id"]]
    code, out, _ = run_cli(capsys, "annotate", "--remove", str(made["id"]), "--db", played)
    assert code == 0 and "removed annotation" in out
    assert json.loads(run_cli(capsys, "annotations", "--json", "--db", played)[1]) == []


def test_the_config_extends_the_labels(played: str, capsys, tmp_path: Path):
    target = json.loads(run_cli(capsys, "search", "cheat", "--limit", "1", "--json", "--db", played)[1])["hits"][0]
    code, _, err = run_cli(capsys, "annotate", target["target"], "blunder", "--db", played)
    assert code == 2 and "unknown label 'blunder'" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "config.toml").write_text('labels = ["blunder"]\n', encoding="utf-8")
    assert run_cli(capsys, "annotate", target["target"], "blunder", "--db", played)[0] == 0


@pytest.mark.parametrize("args, message", [
    (["search", "--verdict", "sure"], "--verdict sure: one of agree"),
    (["search", "x", "--self-min", "2", "--self-max", "1"], "--self-min 2 is above --self-max 1"),
    (["search", "x", "--in", "prompt"], "--in: unknown field 'prompt'"),
    (["search"], "give words to look for or at least one filter"),
    (["search", "--", "-alone"], "besides the -words"),  # -words come after --
    (["annotate", "ep#x", "mistake"], "is not EPISODE#STEP"),
    (["annotate", "no-such-episode#0", "mistake"], "no episode 'no-such-episode'"),
    (["annotate", "--remove", "99"], "no annotation 99"),
])
def test_bad_input_is_one_line(played: str, capsys, args, message):
    code, out, err = run_cli(capsys, args[0], "--db", played, *args[1:])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_an_older_file_is_upgraded_with_a_backup_and_indexed_with_progress(tmp_path: Path, capsys,
                                                                         monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "old.db"
    as_older_code(monkeypatch, 7)
    assert run_cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--db", str(db))[0] == 0
    monkeypatch.undo()
    gc.collect()  # the in-process `run` left its store to the garbage collector (a process would have exited)
    monkeypatch.setattr("s3gym_tui.cli.search.PROGRESS_FROM", 10)  # (the real threshold is thousands)
    code, out, err = run_cli(capsys, "search", "opponent", "--progress", "plain", "--json", "--db", str(db))
    assert code == 0, err
    assert "upgrading" in err and "backup" in err and "indexing" in err and "older steps" in err
    assert list(tmp_path.glob("old.db.schema7*.bak"))
    result = json.loads(out)
    assert result["hits"] and result["unindexed_steps"] == 0
    code, _, err = run_cli(capsys, "search", "opponent", "--db", str(db))
    assert code == 0 and "indexing" not in err  # once


def test_divergences_of_a_fork_and_its_source(tmp_path: Path, capsys):
    db = tmp_path / "f.db"
    with Store(db) as store:
        source = store.episodes.add_episode(make_episode(None, id="src", seed=4))
        fork = store.episodes.add_episode(make_episode(None, id="frk", seed=4, fork_of="src", fork_step=2))
        store.episodes.add_steps([make_step("src", i, action=a) for i, a in enumerate(["A", "B", "C", "D"])])
        store.episodes.add_steps([make_step("frk", i, action=a) for i, a in enumerate(["A", "B", "X", "D"])])
        del source, fork
    hits = json.loads(run_cli(capsys, "search", "--divergences", "--json", "--db", str(db))[1])["hits"]
    assert sorted(h["target"] for h in hits) == ["frk#2", "src#2"]
    hits = json.loads(run_cli(capsys, "search", "--divergences", "--forks", "--json", "--db", str(db))[1])["hits"]
    assert [h["target"] for h in hits] == ["frk#2"]


def test_the_divergence_rule_is_compares():
    from s3gym_tui.engine.compare import first_divergence
    from s3gym_tui.engine.finding import first_action_divergence

    cases = [(["A", "b "], ["a", "B"]), (["A", "B"], ["A", "C"]), (["A"], ["A", "B"]), ([], []), (["x"], [])]
    for a, b in cases:
        steps_a = [make_step("a", i, action=x) for i, x in enumerate(a)]
        steps_b = [make_step("b", i, action=x) for i, x in enumerate(b)]
        assert first_action_divergence(a, b) == first_divergence(steps_a, steps_b), (a, b)


def test_a_search_on_a_full_disk_says_so_and_that_its_results_are_incomplete(tmp_path: Path, capsys,
                                                                             monkeypatch: pytest.MonkeyPatch):
    """The first search on a full disk printed "no matches", exit 0, "the file is read-only here" while
    the waiting steps were never indexed. The disk is full as the reliability tests fill it (SQLite's
    max_page_count): the search says so, shows what it found, exits 3; with room again it finds them."""
    from s3gym_tui.store.connection import Connection

    db = tmp_path / "full.db"
    with Store(db) as store:
        episode = store.episodes.add_episode(make_episode(None, id="ep", seed=4))
        store.episodes.add_steps([make_step("ep", i, feedback="queued grudge " + " ".join(f"w{i}x{k}" for k in range(300)))
                                  for i in range(30)])  # not indexed yet; their index needs new pages
        assert store.search.search_backlog() == 30
    original = Connection._connect

    def full(self):
        conn = original(self)
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        return conn

    monkeypatch.setattr(Connection, "_connect", full)
    code, out, err = run_cli(capsys, "search", "grudge", "--db", str(db))
    assert code == 3 and "no matches" in out
    assert "read-only" not in err and len(err.strip().splitlines()) == 1, err
    assert "results are incomplete: 30 steps could not be indexed" in err and "disk full" in err
    code, out, err = run_cli(capsys, "search", "grudge", "--json", "--db", str(db))
    result = json.loads(out)
    assert code == 3 and result["incomplete"] is True and result["unindexed_steps"] == 30
    assert result["unindexed_why"].startswith("disk full")
    code, out, err = run_cli(capsys, "search", "--game", "trust", "--json", "--db", str(db))
    assert code == 0 and json.loads(out)["incomplete"] is False  # filters alone read the steps themselves
    monkeypatch.setattr(Connection, "_connect", original)
    code, out, err = run_cli(capsys, "search", "grudge", "--json", "--limit", "100", "--db", str(db))
    assert code == 0 and len(json.loads(out)["hits"]) == 30 and err == ""
    del episode


def test_a_search_of_a_read_only_file_with_waiting_steps_says_its_results_are_incomplete(tmp_path: Path, capsys):
    db = tmp_path / "ro.db"
    with Store(db) as store:
        store.episodes.add_episode(make_episode(None, id="ep", seed=4))
        store.episodes.add_steps([make_step("ep", i, feedback="queued grudge") for i in range(3)])
    db.chmod(0o444)
    try:
        code, out, err = run_cli(capsys, "search", "grudge", "--db", str(db))
    finally:
        db.chmod(0o644)
    assert code == 3 and "results are incomplete: 3 steps could not be indexed" in err and "read-only" in err
