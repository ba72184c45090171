"""The finding, reproduced: per game, the learner's Summary-vs-History Delta NABA (the paper's sign: Summary
minus History) with the paper's mean beside it, from a real sweep of `learner` over the seven games x
{none, history, summary} (the demo's schedule unless a database is given), and the embedded model's beside
it when asked (`--embedded`: slow, a short schedule).

    python benchmarks/learner_finding.py [--db DEMO.db] [--embedded] [--episodes 12 --eval-every 3 --eval-episodes 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402

CLI = [sys.executable, "-m", "s3gym_tui"]


def sweep(db: Path, models: str, extra: list[str]) -> tuple[str, float]:
    """Run a sweep into `db`; (its id, wall seconds)."""
    start = time.perf_counter()
    subprocess.run(CLI + ["sweep", "--games", "all", "--models", models, "--yes", "--progress", "none",
                          "--db", str(db)] + extra, check=True, stdout=subprocess.DEVNULL)
    listed = json.loads(subprocess.run(CLI + ["sweeps", "--db", str(db), "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    return listed[0]["id"], time.perf_counter() - start


def tables(db: Path, sweep_id: str) -> dict:
    out = subprocess.run(CLI + ["report", "--sweep", sweep_id, "--db", str(db), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["tables"]


def per_game(report: dict) -> dict[str, dict]:
    """game -> {pathway: (y0, final, NABA)}, 'delta', 'paper'."""
    found: dict[str, dict] = {}
    for row in report["curves"]["rows"]:
        found.setdefault(row["game"], {})[row["pathway"]] = (row["y0"], row["final"], row["naba"])
    for row in report["delta_naba"]["rows"]:
        if row["game"] in found:
            found[row["game"]]["delta"] = row["mean_delta"]
            found[row["game"]]["paper"] = row["paper_mean_delta"]
    return found


def fmt(x, digits: int = 2) -> str:
    return "—" if x is None else f"{x:+.{digits}f}" if digits < 0 else f"{x:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, help="a database with a learner sweep (else one is made)")
    parser.add_argument("--embedded", action="store_true", help="also the embedded model (slow)")
    parser.add_argument("--episodes", default="12")
    parser.add_argument("--eval-every", default="3")
    parser.add_argument("--eval-episodes", default="5")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="learner-finding-"))
    db = args.db or work / "learner.db"
    if args.db:
        sweep_id = json.loads(subprocess.run(CLI + ["sweeps", "--db", str(db), "--json"], check=True,
                                             capture_output=True, text=True).stdout)[-1]["id"]
        seconds = None
    else:
        sweep_id, seconds = sweep(db, "learner", ["--episodes", args.episodes, "--eval-every", args.eval_every,
                                                  "--eval-episodes", args.eval_episodes])
    learner = per_game(tables(db, sweep_id))
    embedded: dict[str, dict] = {}
    if args.embedded:
        edb = work / "embedded.db"
        eid, _ = sweep(edb, "local/smollm2-135m", ["--pathways", "history,summary", "--episodes", "2",
                                                   "--eval-every", "1", "--eval-episodes", "1", "--step-cap", "3",
                                                   "--decoding", "grammar", "--concurrency", "1",
                                                   "--timeout", "1800"])
        embedded = per_game(tables(edb, eid))
    rows = []
    for game in games.names():
        g = learner.get(game, {})
        none, hist, summ = g.get("none"), g.get("history"), g.get("summary")
        delta = g.get("delta")
        verdict = "—" if delta is None else ("tie" if abs(delta) < 1e-9 else
                                             "History better" if delta < 0 else "Summary better")
        row = [game, fmt(none[0] if none else None), fmt(none[1] if none else None),
               fmt(hist[1] if hist else None), fmt(summ[1] if summ else None),
               fmt(hist[2] if hist else None), fmt(summ[2] if summ else None),
               "—" if delta is None else f"{delta:+.2f}", verdict,
               "—" if g.get("paper") is None else f"{g['paper']:+.2f}"]
        if args.embedded:
            e = embedded.get(game, {}).get("delta")
            row.append("—" if e is None else f"{e:+.2f}")
        rows.append(row)
    header = ["game", "y0", "none final", "history final", "summary final", "NABA history", "NABA summary",
              "Delta NABA (S-H)", "learner", "paper mean"] + (["embedded Delta NABA"] if args.embedded else [])
    took = "" if seconds is None else f"; the sweep took {seconds:.0f} s"
    print_table(f"learner: Summary vs History (sweep {sweep_id}{took})", header, rows)


if __name__ == "__main__":
    main()
