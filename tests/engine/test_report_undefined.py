"""Undefined figures in the report are undefined: a run stopped after its x = 0 checkpoint has no
AUC+ or NABA (not 0.00), is neither a tie nor a win in Delta NABA and is not counted in the per-model
mean; a constant self-score has no NMAE; every NMAE of a game is on one scale. Checked through the
real CLI (`s3gym report` text, --json, --csv, and --sweep)."""

from __future__ import annotations

import csv
import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.glossary import REASONS
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store
from tests.engine.helpers import hand_run

PARTIAL, SUMMARY, SNAKE, CONSTANT = ("trust-history-partial", "trust-summary-full", "snake-history-full",
                                     "snake-none-constant")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """One model (m/x): Trust History stopped after x = 0 (1 of 2 checkpoints, as a budget-stopped
    sweep leaves it), Trust Summary and Snake History finished, and a Snake run whose self-score is
    always 1. All four belong to one sweep."""
    path = tmp_path_factory.mktemp("undefined") / "u.db"
    with Store(path) as store:
        sweep, _ = store.sweeps.create_sweep(SweepConfig(games=("trust", "snake"), pathways=("history", "summary"),
                                                         models=("m/x",)), runs=[], sweep_id="sweep-partial")
        hand_run(store, PARTIAL, [[(2, 1), (0, -1), (1, 0)]], {0: [[(1, 1), (0, 0)]]}, {0: [2.0]},
                 pathway="history", explore_episodes=3, status="stopped", sweep_id=sweep.id)
        # y = 2 -> 4 over x = 0..3: AUC+ = 3 * (0 + 2) / 2 = 3, NABA = 3 / max(2, 1) = 1.5
        hand_run(store, SUMMARY, [[(1, 1)], [(0, 1)], [(2, 3)]], {0: [[(1, 0)]], 3: [[(2, 2)]]},
                 {0: [2.0], 3: [4.0]}, pathway="summary", sweep_id=sweep.id)
        # y = 1 -> 3: AUC+ = 3, NABA = 3 / max(1, 1) = 3
        hand_run(store, SNAKE, [[(0, 0), (1, 1)]] * 3, {0: [[(0, 0)]], 3: [[(1, 1)]]}, {0: [1.0], 3: [3.0]},
                 game="snake", pathway="history", sweep_id=sweep.id)
        hand_run(store, CONSTANT, [[(1, 0), (1, 1), (1, 4)]] * 3, {0: [[(1, 0)]], 3: [[(1, 1)]]},
                 {0: [0.0], 3: [1.0]}, game="snake", pathway="none", sweep_id=sweep.id)
    return path


def report(capsys, db, *args) -> tuple[int, str]:
    code = main(["report", *args, "--db", str(db)])
    return code, capsys.readouterr().out


def line_of(out: str, first: str, *needles: str) -> str:
    """The first table line whose first cell is `first` and that holds every needle."""
    return next(line for line in out.splitlines()
                if line.replace("┃", "│").startswith(f"│ {first} ") and all(n in line for n in needles))


def cells(line: str) -> list[str]:
    """The cells of a table row or header line (rich draws them between │ and ┃)."""
    return [c.strip() for c in line.replace("┃", "│").strip("│ ").split("│")]


def test_a_run_with_one_of_two_checkpoints_has_no_auc_or_naba_in_json(db, capsys):
    code, out = report(capsys, db, PARTIAL, SUMMARY, SNAKE, "--json")
    tables = json.loads(out)["tables"]
    assert code == 0
    curves = {r["run"]: r for r in tables["curves"]["rows"]}
    partial = curves[PARTIAL]
    assert partial["checkpoints"] == "1/2" and partial["y0"] == 2.0
    assert partial["auc_plus"] is None and partial["naba"] is None  # they were 0.0
    assert partial["why"] == "AUC+, NABA: one checkpoint"
    assert curves[SUMMARY]["naba"] == pytest.approx(1.5) and curves[SUMMARY]["why"] is None
    # per model: History's NABA over games used only Snake's (Trust's is undefined): 3.0, 1 of 2 games
    by_model = {(r["model"], r["pathway"]): r for r in tables["by_model"]["rows"]}
    history = by_model["m/x", "history"]
    assert (history["games_used"], history["games"]) == (1, 2)
    assert history["mean_naba"] == pytest.approx(3.0)  # was (0 + 3) / 2 = 1.5 over "games 2"
    # Delta NABA: the pair is undefined, not a tie
    trust = next(r for r in tables["delta_naba"]["rows"] if r["game"] == "trust")
    assert (trust["n"], trust["wins"], trust["losses"], trust["ties"], trust["skipped"]) == (0, 0, 0, 0, 1)
    assert trust["mean_delta"] is None and trust["why"] == "mean: NABA undefined"


def test_a_run_with_one_of_two_checkpoints_prints_dashes_and_the_reason(db, capsys):
    code, out = report(capsys, db, PARTIAL, SUMMARY, SNAKE)
    assert code == 0
    header = cells(line_of(out, "game", "AUC+"))
    row = dict(zip(header, cells(line_of(out, "trust", PARTIAL, "1/2"))))
    assert (row["AUC+"], row["NABA"]) == ("—", "—")
    assert row["y0"] == "2.00" and row["why —"] == "AUC+, NABA: one checkpoint"
    by_model = dict(zip(cells(line_of(out, "model", "mean NABA")), cells(line_of(out, "m/x", "history"))))
    assert (by_model["games"], by_model["of"], by_model["mean NABA"]) == ("1", "2", "3.00")
    delta = dict(zip(cells(line_of(out, "game", "wins")), cells(line_of(out, "trust", "+8.43"))))
    assert (delta["n"], delta["ties"], delta["skipped"], delta["mean"]) == ("0", "0", "1", "—")
    assert f"one checkpoint: {REASONS['one checkpoint']}" in out  # the legend says why
    assert f"NABA undefined: {REASONS['NABA undefined']}" in out


def test_a_run_with_one_of_two_checkpoints_leaves_csv_cells_empty(db, capsys, tmp_path):
    code, _ = report(capsys, db, PARTIAL, SUMMARY, SNAKE, "--csv", str(tmp_path))
    assert code == 0
    with open(tmp_path / "curves.csv", newline="", encoding="utf-8") as handle:
        curves = {r["run"]: r for r in csv.DictReader(handle)}
    assert curves[PARTIAL]["auc_plus"] == "" and curves[PARTIAL]["naba"] == ""
    assert curves[PARTIAL]["why"] == "AUC+, NABA: one checkpoint" and curves[SUMMARY]["why"] == ""
    assert float(curves[SUMMARY]["naba"]) == pytest.approx(1.5)
    with open(tmp_path / "delta_naba.csv", newline="", encoding="utf-8") as handle:
        trust = next(r for r in csv.DictReader(handle) if r["game"] == "trust")
    assert trust["mean_delta"] == "" and trust["ties"] == "0" and trust["skipped"] == "1"


def test_a_constant_self_score_has_no_nmae(db, capsys, tmp_path):
    # alone, the run is its game's only steps: s is always 1, so min-max normalising s divides by 0
    code, out = report(capsys, db, CONSTANT, "--json", "--csv", str(tmp_path))
    tables = json.loads(out)["tables"]
    assert code == 0
    by_run = {r["phase"]: r for r in tables["judging_by_run"]["rows"]}
    for phase in ("all", "explore", "eval"):
        assert by_run[phase]["nmae"] is None and by_run[phase]["why"] == "NMAE: s constant"
        assert by_run[phase]["agreement"] is not None  # what is defined stays defined
    [scale] = tables["nmae_scale"]["rows"]
    assert (scale["s_min"], scale["s_max"], scale["why"]) == (1.0, 1.0, "NMAE: s constant")
    [couple] = tables["coupling"]["rows"]
    assert couple["corr_neg_nmae_gain"] is None
    with open(tmp_path / "judging_by_game.csv", newline="", encoding="utf-8") as handle:
        assert {r["nmae"] for r in csv.DictReader(handle)} == {""}
    code, out = report(capsys, db, CONSTANT)
    header = cells(line_of(out, "run", "NMAE"))
    row = dict(zip(header, cells(line_of(out, CONSTANT, " explore "))))
    assert row["NMAE"] == "—" and row["why —"] == "NMAE: s constant"
    assert f"s constant: {REASONS['s constant']}" in out


def test_explore_and_eval_nmae_share_their_games_scale(db, capsys):
    # with the Snake History run in the report, Snake's scale is s 0..1, r 0..4 (the constant run's
    # r = 4): every Snake NMAE is on it, by phase and per run
    code, out = report(capsys, db, SNAKE, CONSTANT, "--json")
    tables = json.loads(out)["tables"]
    [scale] = tables["nmae_scale"]["rows"]
    assert (scale["s_min"], scale["s_max"], scale["r_min"], scale["r_max"]) == (0.0, 1.0, 0.0, 4.0)
    by_run = {(r["run"], r["phase"]): r["nmae"] for r in tables["judging_by_run"]["rows"]}
    # constant run, explore: |1 - r/4| for r = 0, 1, 4 -> 1, 0.75, 0; eval: r = 0, 1 -> 1, 0.75
    assert by_run[CONSTANT, "explore"] == pytest.approx(1.75 / 3)
    assert by_run[CONSTANT, "eval"] == pytest.approx(0.875)
    # snake history, explore (0,0), (1,1) x 3: |0 - 0|, |1 - 1/4| -> mean 0.375; eval the same two
    assert by_run[SNAKE, "explore"] == pytest.approx(0.375) and by_run[SNAKE, "eval"] == pytest.approx(0.375)
    by_game = {r["phase"]: r["nmae"] for r in tables["judging_by_game"]["rows"]}
    assert by_game["explore"] == pytest.approx((3 * 1.75 + 3 * 0.75) / 15)
    assert by_game["eval"] == pytest.approx((1 + 0.75 + 0 + 0.75) / 4)


def test_a_partial_sweep_reports_undefined_as_undefined(db, capsys):
    code, out = report(capsys, db, "--sweep", "sweep-partial", "--json")
    tables = json.loads(out)["tables"]
    assert code == 0
    curves = {r["run"]: r for r in tables["curves"]["rows"]}
    assert curves[PARTIAL]["naba"] is None and curves[PARTIAL]["why"] == "AUC+, NABA: one checkpoint"
    overall = next(r for r in tables["delta_naba"]["rows"] if r["game"] == "overall")
    assert overall["ties"] == 0 and overall["skipped"] == 1 and overall["mean_delta"] is None
    code, out = report(capsys, db, "--sweep", "sweep-partial")
    assert "1 not finished" in out and "AUC+, NABA: one checkpoint" in out
