"""The report in the paper's shapes: self-judging over all steps and per game and phase, corr(-E,g)
in the CLI, a checkpoint without evaluation episodes missing (not 0), the paper's figures beside
ours, JSON and CSV of every table, and tables that never cut a number or an id at 80 columns."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import statistics

import pytest
from rich.console import Console

from s3gym_tui.cli import main
from s3gym_tui.cli.tables import print_report
from s3gym_tui.engine.report import run_report
from s3gym_tui.engine.report_tables import build_report
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
from tests.engine.helpers import hand_run as _hand_run


def test_self_judging_is_over_all_steps_per_game_and_split_by_phase(tmp_path):
    store = Store(tmp_path / "j.db")
    # trust: explore (1,2) agree, (1,-1) over, (None,0) missing; eval (0,3) under, (2,2) agree
    a = _hand_run(store, "trust-a", [[(1, 2), (1, -1), (None, 0)]], {0: [[(0, 3), (2, 2)]], 1: [[]]},
                  {0: [1.0], 1: [2.0]})
    # a second trust run adds (0, 0) agree in exploration
    b = _hand_run(store, "trust-b", [[(0, 0)]], {0: [[]], 1: [[]]}, {0: [1.0], 1: [1.0]})
    report = build_report([run_report(store, r) for r in (a, b)])
    rows = {(r["game"], r["phase"]): r for r in report.table("judging_by_game").records()}
    assert (rows["trust", "all"]["steps"], rows["trust", "all"]["missing"]) == (5, 1)
    assert rows["trust", "all"]["agreement"] == pytest.approx(3 / 5)
    assert rows["trust", "all"]["over"] == pytest.approx(1 / 5)
    assert rows["trust", "all"]["under"] == pytest.approx(1 / 5)
    assert rows["trust", "all"]["paper_agreement"] == 0.665
    assert rows["trust", "explore"]["agreement"] == pytest.approx(2 / 3) and rows["trust", "explore"]["steps"] == 3
    assert rows["trust", "eval"]["agreement"] == pytest.approx(1 / 2) and rows["trust", "eval"]["steps"] == 2
    # NMAE over all of the game's steps, each series min-max normalised over them: s in [0, 2], r in [-1, 3]
    pairs = [(1, 2), (1, -1), (0, 3), (2, 2), (0, 0)]
    expected = statistics.mean(abs(s / 2 - (r + 1) / 4) for s, r in pairs)
    assert rows["trust", "all"]["nmae"] == pytest.approx(expected)
    by_run = {(r["run"], r["phase"]): r for r in report.table("judging_by_run").records()}
    assert by_run["trust-a", "all"]["steps"] == 4 and by_run["trust-a", "all"]["agreement"] == pytest.approx(0.5)


def _coupling_run(store: Store):
    """Exploration blocks [0,3), [3,6), [6,9) with agreement 1, 2/3, 1/3 and gains +2, +1, -1."""
    def block(agree: int):  # three episodes of one step: `agree` of them agree, with s and r in {-1, 1}
        return [[(1, 1) if k % 2 == 0 else (-1, -1)] if k < agree else [(1, -1)] for k in range(3)]

    explore = block(3) + block(2) + block(1)
    means = {0: [0.0], 3: [2.0], 6: [3.0], 9: [2.0]}
    return _hand_run(store, "trust-coupled", explore, {x: [[]] for x in means}, means)


def test_the_cli_reports_both_coupling_correlations(tmp_path, capsys):
    db = tmp_path / "c.db"
    with Store(db) as store:
        run = _coupling_run(store)
    code = main(["report", run.id, "--json", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0
    [row] = json.loads(out)["tables"]["coupling"]["rows"]
    gains = [2.0, 1.0, -1.0]  # checkpoint differences (a correlation ignores the range's scale)
    agreement = [1.0, 2 / 3, 1 / 3]
    assert row["used"] == 3
    assert row["corr_agreement_gain"] == pytest.approx(statistics.correlation(agreement, gains))
    # E_t: s and r in {-1, 1} -> norm 0 or 1: an agreeing step has |diff| 0, another 1, so E_t = 1 - A_t
    assert row["corr_neg_nmae_gain"] == pytest.approx(statistics.correlation([a - 1 for a in agreement], gains))
    code = main(["report", run.id, "--db", str(db)])
    out = capsys.readouterr().out
    assert "corr(-E,g)" in out and f"{row['corr_neg_nmae_gain']:.2f}" in out


def test_a_checkpoint_without_evaluation_episodes_is_missing_not_zero(tmp_path, capsys):
    db = tmp_path / "z.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", explore_episodes=2, eval_every=1,
                                              eval_episodes=0), run_id="trust-no-eval")
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        assert [c.mean for c in store.checkpoints.list(run.id)] == [None, None, None]
    code = main(["report", run.id, "--json", "--db", str(db)])
    tables = json.loads(capsys.readouterr().out)["tables"]
    [curve] = tables["curves"]["rows"]
    assert code == 0 and curve["y0"] is None and curve["avg"] is None and curve["naba"] is None
    assert [r["mean"] for r in tables["checkpoints"]["rows"]] == [None, None, None]
    code = main(["report", run.id, "--db", str(db)])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "trust-no-eval" in line and "0/3" in line)
    assert "0.00" not in line and " — " in line


@pytest.fixture(scope="module")
def long_ids_db(tmp_path_factory):
    """Three finished Trust runs with long ids (History, Summary, none), played by the scripted player."""
    path = tmp_path_factory.mktemp("long") / "long.db"
    with Store(path) as store:
        for pathway in ("history", "summary", "none"):
            run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway=pathway,
                                                  explore_episodes=3, eval_every=1, eval_episodes=1),
                                        run_id=f"trust-{pathway}-long-0123456789abcdef01")
            asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    return path


def test_tables_never_cut_a_number_or_a_run_id_at_80_columns(long_ids_db):
    with Store(long_ids_db) as store:
        report = build_report([run_report(store, r) for r in store.runs.list_runs()])
    buffer = io.StringIO()
    print_report(Console(file=buffer, width=80, color_system=None), report)
    text = buffer.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for table in report.tables:
        ids = [v for row in table.rows for v, c in zip(row, table.columns) if c.kind == "id"]
        for run_id in ids:
            assert any(run_id in line for line in text.splitlines()), run_id  # whole, on one line
    curves = report.table("curves")
    for row in curves.rows:
        for value, column in zip(row, curves.columns):
            if column.kind == "num" and value is not None and column.header in ("Avg", "NABA", "AUC+"):
                assert f"{value:.2f}" in text
    assert "not shown at 80 columns" in text  # columns were dropped, and it says so


def test_every_table_is_in_the_json_and_in_a_csv_file(long_ids_db, tmp_path, capsys):
    out_dir = tmp_path / "csv"
    code = main(["report", "--json", "--csv", str(out_dir), "--db", str(long_ids_db)])
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # stdout is one JSON document; the CSV note went to stderr
    assert code == 0 and "wrote" in captured.err
    names = set(data["tables"])
    assert {"runs", "curves", "by_model", "delta_naba", "judging_by_game", "judging_by_run", "coupling",
            "coupling_by_game", "checkpoints"} <= names
    for name, table in data["tables"].items():
        with open(out_dir / f"{name}.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        assert rows[0] == table["columns"] and len(rows) - 1 == len(table["rows"])
    [delta, overall] = data["tables"]["delta_naba"]["rows"]
    assert delta["game"] == "trust" and delta["paper_mean_delta"] == 8.43 and overall["game"] == "overall"


def test_the_paper_figures_are_printed_beside_ours(long_ids_db, capsys):
    code = main(["report", "--db", str(long_ids_db)])
    out = capsys.readouterr().out
    assert code == 0
    delta = next(line for line in out.splitlines() if line.lstrip("│┃ ").startswith("trust") and "+8.43" in line)
    judging = next(line for line in out.splitlines() if "trust" in line and " all " in line and f"{0.665:.2f}" in line)
    assert delta and judging and "arXiv 2608.31100" in out
