"""First install benchmark: the README's install command in a fresh venv, on this repository's committed tree.

    python benchmarks/first_install.py                 # pip's wheel cache used (a second install)
    python benchmarks/first_install.py --no-cache-dir  # as on a new machine: llama.cpp is compiled

Figures: the Python and the compilers found, wall time and the CPU time pip and the compiler used (user +
system, which the machine's load does not inflate), the machine's load average (sampled every 10 s) and
cores, then whether the installed `s3gym` plays a step with the bundled model. Run it niced on a shared
machine (`nice -n 10`); it takes minutes (cached) to an hour (compiling on a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        return f"{name}: none"
    first = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()
    return f"{name}: {first[0] if first else path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-cache-dir", action="store_true", help="Build every wheel again (a new machine).")
    parser.add_argument("--keep", type=Path, help="Install into this directory and keep it.")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="s3gym-install-"))
    work.mkdir(parents=True, exist_ok=True)
    source, venv = work / "src", work / "venv"
    source.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    print(f"python {platform.python_version()} ({sys.executable}); {tool('cc')}; {tool('c++')}; {tool('cmake')}")
    print(f"cores: {os.cpu_count()}; load average at the start: {os.getloadavg()[0]:.1f}")
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-qq", "-e", ".[local]"]  # (-qq: errors only)
    if args.no_cache_dir:
        pip.insert(2, "--no-cache-dir")
    installed = subprocess.run(pip, cwd=source)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    done.set()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    mean = sum(loads) / len(loads) if loads else os.getloadavg()[0]
    print(f"install ({'--no-cache-dir' if args.no_cache_dir else 'wheel cache used'}): exit {installed.returncode}, "
          f"wall {wall / 60:.1f} min, CPU {cpu / 60:.1f} min (user + system), load average during it "
          f"{mean:.1f} (max {max(loads, default=mean):.1f}) on {os.cpu_count()} cores")
    if installed.returncode == 0:
        db = work / "check.db"
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        t0 = time.monotonic()
        ran = subprocess.run([str(venv / "bin" / "s3gym"), "run", "trust", "--model", "local/smollm2-135m",
                              "--episodes", "1", "--eval-every", "1", "--eval-episodes", "0", "--step-cap", "2",
                              "--progress", "none", "--db", str(db)], env=env, capture_output=True, text=True)
        import sqlite3

        steps = sqlite3.connect(db).execute("SELECT count(*), sum(tokens_out) FROM steps").fetchone() \
            if db.exists() else (0, 0)
        print(f"the bundled model: exit {ran.returncode}, {steps[0]} steps, {steps[1] or 0} tokens written "
              f"in {time.monotonic() - t0:.0f} s")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
