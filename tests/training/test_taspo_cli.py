"""`s3gym credit EPISODE` as a person runs it: computes and stores, then reads what is stored; --json with
nulls for what is undefined; hostile analyzer text reaches the terminal only through the text gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from s3gym_tui.cli import main
from s3gym_tui.engine.credit import episode_credit
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

from tests.training.test_taspo_credit import add_episode

ROOT = Path(__file__).resolve().parents[2]


def make_group(db: Path):
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
        eps = [add_episode(store, run, ["C", "C", "D"], [2, 2, 2]),
               add_episode(store, run, ["C", "D", "D"], [2, 1, 2]),
               add_episode(store, run, ["D", "D", "C"], [0, 0, 0])]
    return [e.id for e in eps]


def test_credit_command_computes_stores_and_reads_back(tmp_path, tiny_base, capsys):
    db = tmp_path / "s.db"
    good, good2, bad = make_group(db)
    code = main(["credit", bad, "--db", str(db), "--scorer", str(tiny_base), "--kappa", "0", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert data["episode_id"] == bad and data["scorer"] == str(tiny_base) and data["advantage"] < 0
    first = data["actions"][0]
    assert first["items"][0]["evidence"][0][0] in (good, good2) and first["shift"] is not None
    assert first["credited_advantage"] == data["advantage"] * first["weight"]
    with Store(db) as store:
        stored = episode_credit(store, bad)
    assert stored is not None and stored.id == data["id"]
    # no option: the stored credit is read (no analyzer, no scorer needed), printed per step
    code = main(["credit", bad, "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "uniform credit (plain GRPO)" in out.out and "open with 'C'" in out.out and f"{good}#0" in out.out
    assert "│" in out.out and out.err == ""


def test_credit_of_a_lone_episode_is_uniform_and_undefined_figures_are_null(tmp_path, capsys):
    db = tmp_path / "s.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none"))
        lone = add_episode(store, run, ["C"], [1])
        store.conn.execute("UPDATE steps SET self_score = NULL WHERE episode_id = ?", (lone.id,))
    code = main(["credit", lone.id, "--db", str(db), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert data["advantage"] is None and data["actions"][0]["weight"] is None and data["reward"] is None
    assert data["actions"][0]["credited_advantage"] is None and "no successful sibling" in data["note"]
    main(["credit", lone.id, "--db", str(db)])
    assert "A = —" in capsys.readouterr().out


def test_bad_input_is_one_line(tmp_path, capsys):
    db = tmp_path / "s.db"
    make_group(db)
    assert main(["credit", "no-such", "--db", str(db)]) != 0
    assert "no episode 'no-such'" in capsys.readouterr().err
    assert main(["credit", "ep0", "--db", str(db), "--credit", "sideways"]) == 2
    assert "unknown credit 'sideways'" in capsys.readouterr().err


def test_hostile_analyzer_text_is_gated_in_a_subprocess(tmp_path, tiny_base):
    db = tmp_path / "s.db"
    good, good2, bad = make_group(db)
    with Store(db) as store:
        out = subprocess.run([sys.executable, "-m", "s3gym_tui", "credit", bad, "--db", str(db), "--scorer",
                              str(tiny_base)], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert out.returncode == 0, out.stderr
        ext = store.conn.execute("SELECT extraction_id FROM episode_credits").fetchone()[0]
        # a hostile analyzer reply as stored (escape sequences in a requirement)
        store.conn.execute("UPDATE pi_items SET requirement = ? WHERE extraction_id = ? AND position = 0",
                           ("\x1b]52;c;ZXZpbA==\x07\x1b[2J evil", ext))
    out = subprocess.run([sys.executable, "-m", "s3gym_tui", "credit", bad, "--db", str(db)], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "evil" in out.stdout and "\x1b" not in out.stdout and "\x07" not in out.stdout


def test_weight_bar_is_centred_on_uniform_credit():
    from s3gym_tui.cli.credit import weight_bar

    assert weight_bar(1.0, 0.5) == "      │      "
    assert weight_bar(0.5, 0.5) == "██████│      " and weight_bar(1.5, 0.5) == "      │██████"
    assert weight_bar(1.25, 0.5).index("█") > 6 and weight_bar(None, 0.5).strip() == ""
