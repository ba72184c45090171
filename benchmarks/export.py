"""Export benchmark: size and time of `s3gym export` for a scripted History run, in the single-file
JSONL format (every step's prompt expanded: the format before the folder exports) and in the folder
formats (one typed file per record type; steps list shared prompt parts, or --full-prompts) and as an
Inspect eval log (a zip of one JSON member per episode, zstd-compressed, repeated texts stored once).

    python benchmarks/export.py                        # snake, 30 exploration episodes (the run's defaults otherwise)
    python benchmarks/export.py --episodes 6 --game trust
    python benchmarks/export.py --db /tmp/h30.db --run RUN   # an existing run: no new run
    python benchmarks/export.py --keep                 # keep the database and the exports
    python benchmarks/export.py --format jsonl --format inspect   # only these formats

Figures: the run's steps, then per format the bytes written, bytes per step, the ratio to the single
file and the wall time of the export (in process, one consistent read snapshot each)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _util  # noqa: E402,F401 (LITELLM_LOCAL_MODEL_COST_MAP)

from s3gym_tui.cli import main  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402

FORMATS = {"jsonl (one file, before)": ["-o", "{out}.jsonl"],
           "jsonl-dir": ["-f", "jsonl-dir", "-o", "{out}"],
           "parquet": ["-f", "parquet", "-o", "{out}"],
           "jsonl-dir --full-prompts": ["-f", "jsonl-dir", "--full-prompts", "-o", "{out}"],
           "parquet --full-prompts": ["-f", "parquet", "--full-prompts", "-o", "{out}"],
           "inspect (.eval)": ["-f", "inspect", "-o", "{out}.eval"]}


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.iterdir())


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="snake")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--db", type=Path, help="an existing database (with --run): no new run")
    parser.add_argument("--run", help="the run to export from --db")
    parser.add_argument("--keep", action="store_true", help="keep the database and the exports")
    names = list(dict.fromkeys(n.split()[0] for n in FORMATS))  # each once (two are measured twice)
    parser.add_argument("--format", action="append", choices=names, dest="formats",
                        help="measure only these formats (repeatable; the first measured is the ratio's base)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="s3gym-export-bench-"))
    db, run_id = args.db, args.run
    if db is None:
        db = work / "history.db"
        started = time.perf_counter()
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the run's report
            code = main(["run", args.game, "-m", f"scripted/{args.game}", "-p", "history", "--episodes",
                         str(args.episodes), "--progress", "none", "--db", str(db)])
        if code != 0:
            sys.exit(f"the run failed (exit code {code})")
        print(f"scripted {args.game} History run, {args.episodes} exploration episodes: "
              f"{time.perf_counter() - started:.1f} s")
    with Store(db) as store:
        run = store.runs.get_run(run_id) if run_id else store.runs.list_runs(limit=1)[0]
        episodes = store.episodes.list(run.id)
        steps = sum(e.n_steps for e in episodes)
    print(f"run {run.id}: {len(episodes)} episodes, {steps:,} steps; database {_size(db) / 1e6:.1f} MB")
    rows, before = [], None
    for name, template in FORMATS.items():
        if args.formats and name.split()[0] not in args.formats:
            continue
        out = work / name.split()[0].replace("(", "")
        out = out.with_name(out.name + ("-full" if "full" in name else ""))
        argv = [a.format(out=out) for a in template]
        started = time.perf_counter()
        code = main(["export", run.id, *argv, "--db", str(db)])
        seconds = time.perf_counter() - started
        if code != 0:
            sys.exit(f"export {name} failed (exit code {code})")
        size = _size(Path(argv[argv.index("-o") + 1]))
        before = before or size
        rows.append([name, f"{size / 1e6:,.1f}", f"{size / max(steps, 1):,.0f}", f"{before / size:,.1f}x",
                     f"{seconds:.1f}"])
    _util.print_table(f"s3gym export of {run.id}", ["format", "MB", "bytes/step", "smaller by", "seconds"], rows)
    if args.keep:
        print(f"(files in {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main_()
