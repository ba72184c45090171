"""Self-scores that cannot be right: a stated score outside what one step of the game can pay is out of
range (engine.judging.out_of_range, the one decision), and the judging tables count such steps per game,
per run and by phase, in the terminal, --json and --csv."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.judging import (count_out_of_range, judging_report, out_of_range, out_of_range_note,
                                      range_text, step_range)
from s3gym_tui.engine.report import run_report
from s3gym_tui.engine.report_tables import build_report
from s3gym_tui.store import Store
from tests.engine.helpers import hand_run
from tests.fake_openai import FakeOpenAI


@pytest.mark.parametrize("game,s,outside", [
    ("trust", 20.1, True), ("trust", 3.0, False), ("trust", -1.0, False), ("trust", -1.5, True),
    ("trust", 3 + 1e-12, False),  # float noise is not a claim
    ("trust", 3.001, True), ("trust", None, False), ("trust", math.nan, False), ("trust", math.inf, True),
    ("tetris", 4.0, False), ("tetris", 5.0, True), ("tetris", -0.5, True),
    ("minesweeper", -0.1, False), ("minesweeper", -0.2, True), ("minesweeper", 1.0, False),
    ("chess", 1.0, False), ("chess", 12.0, True), ("snake", 2.0, True), ("pvz", 1.0, False),
    ("nullify", 0.0, False),
])
def test_out_of_range_is_the_games_step_range(game, s, outside):
    assert out_of_range(game, "explore", s) is outside
    assert out_of_range(game, "eval", s) is outside  # the seven games pay the same in both modes


def test_the_range_and_its_note_are_read_from_the_game():
    assert step_range("trust", "eval") == (-1.0, 3.0)
    assert range_text("trust") == "-1..3" and range_text("minesweeper", "explore") == "-0.1..1"
    assert out_of_range_note("trust") == "outside what one step of trust can pay: -1..3"
    assert out_of_range_note("Trust-Evolution", "eval").endswith(": -1..3")  # any name the registry knows


def test_a_report_counts_out_of_range_steps_and_their_share_of_the_judged_steps():
    pairs = [(20.1, 2.0), (2.0, 2.0), (None, 0.0), (-7.0, -1.0)]
    counted = count_out_of_range("trust", "explore", pairs)
    assert counted == 2  # the missing self-score is not out of range
    report = judging_report(pairs, out_of_range=counted)
    assert (report.n, report.missing, report.out_of_range) == (3, 1, 2)
    assert report.out_of_range_share == pytest.approx(2 / 3)
    empty = judging_report([(None, 1.0)], out_of_range=0)
    assert empty.out_of_range == 0 and empty.out_of_range_share is None and empty.why["out_of_range_share"]
    assert judging_report(pairs).out_of_range is None  # not checked: no count, no share


def test_hand_written_runs_count_per_game_per_run_and_by_phase(tmp_path):
    store = Store(tmp_path / "h.db")
    # trust: explore 20.1 (out), 2 (in), None (missing); eval 4 (out), -1 (in)
    a = hand_run(store, "trust-a", [[(20.1, 2), (2, 2), (None, 0)]], {0: [[(4, 3), (-1, -1)]], 1: [[]]},
                 {0: [1.0], 1: [2.0]})
    # tetris: 4 rows is in range, 9 is not
    b = hand_run(store, "tetris-b", [[(4, 0), (9, 1)]], {0: [[(0, 0)]], 1: [[]]}, {0: [1.0], 1: [1.0]},
                 game="tetris")
    report = build_report([run_report(store, r) for r in (a, b)])
    by_game = {(r["game"], r["phase"]): r for r in report.table("judging_by_game").records()}
    assert [by_game["trust", p]["out_of_range"] for p in ("all", "explore", "eval")] == [2, 1, 1]
    assert by_game["trust", "all"]["out_of_range_share"] == pytest.approx(2 / 4)
    assert by_game["trust", "explore"]["out_of_range_share"] == pytest.approx(1 / 2)
    assert [by_game["tetris", p]["out_of_range"] for p in ("all", "explore", "eval")] == [1, 1, 0]
    by_run = {(r["run"], r["phase"]): r for r in report.table("judging_by_run").records()}
    assert by_run["trust-a", "eval"]["out_of_range"] == 1 and by_run["tetris-b", "all"]["out_of_range"] == 1
    assert by_run["tetris-b", "eval"]["out_of_range_share"] == 0.0
    note = report.table("judging_by_run").note
    assert "outside what one step of tetris can pay: 0..4" in note and "trust can pay: -1..3" in note


def _odd_rounds_overclaim(request: dict) -> str:
    """A trust player that states 20.1 in odd rounds (a round pays -1..3) and 2 in even ones."""
    text = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    rounds = re.findall(r"Round: (\d+) of", text)
    score = "20.1" if rounds and int(rounds[-1]) % 2 else "2"
    return f"Answer: collaborate, Score: {score}"


@pytest.fixture(scope="module")
def overclaiming_run(tmp_path_factory):
    """A real run through litellm: 2 exploration and 2 evaluation episodes of 10 rounds each."""
    db = tmp_path_factory.mktemp("oor") / "o.db"
    with FakeOpenAI(reply=_odd_rounds_overclaim) as fake:
        code = main(["run", "trust", "-m", "hosted_vllm/fake", "--api-base", fake.base, "--episodes", "2",
                     "--eval-every", "2", "--eval-episodes", "1", "--db", str(db)])
    assert code == 0
    with Store(db) as store:
        [run] = store.runs.list_runs()
        steps = [s for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id)]
    assert len(steps) == 40 and sum(s.self_score == 20.1 for s in steps) == 20  # what the report must count
    return db, run.id


def test_the_cli_report_counts_them_in_json(overclaiming_run, capsys):
    db, run_id = overclaiming_run
    assert main(["report", run_id, "--json", "--db", str(db)]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    by_game = {r["phase"]: r for r in tables["judging_by_game"]["rows"]}
    assert [by_game[p]["out_of_range"] for p in ("all", "explore", "eval")] == [20, 10, 10]
    assert by_game["all"]["out_of_range_share"] == 0.5 and by_game["all"]["steps"] == 40
    by_run = {r["phase"]: r for r in tables["judging_by_run"]["rows"]}
    assert [by_run[p]["out_of_range"] for p in ("all", "explore", "eval")] == [20, 10, 10]


def test_the_cli_report_counts_them_in_csv(overclaiming_run, tmp_path, capsys):
    db, run_id = overclaiming_run
    assert main(["report", run_id, "--csv", str(tmp_path), "--db", str(db)]) == 0
    capsys.readouterr()
    with open(tmp_path / "judging_by_run.csv", encoding="utf-8") as handle:
        rows = {r["phase"]: r for r in csv.DictReader(handle)}
    assert rows["explore"]["out_of_range"] == "10" and float(rows["explore"]["out_of_range_share"]) == 0.5


def test_the_cli_report_prints_the_count_and_what_it_means(overclaiming_run, capsys):
    db, run_id = overclaiming_run
    assert main(["report", run_id, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "out of range" in out
    header = next(line for line in out.splitlines() if "out of range" in line and "agree" in line)
    row = next(line for line in out.splitlines() if line.count("│") > 3 and " all " in line and "trust" in line)
    cells = [c.strip() for c in row.split("│")]
    headers = [c.strip() for c in header.split("┃")]
    assert cells[headers.index("out of range")] == "20"
    assert "outside what one step of trust can pay: -1..3" in " ".join(out.split())
