"""What a person waits for when the app starts and when they ask for help, as a real terminal shows it.

    python benchmarks/ui_start.py                     # 3 rounds at 120x40 on a small scripted database
    python benchmarks/ui_start.py --rounds 5 --db ~/.local/share/s3gym/s3gym.db
    python benchmarks/ui_start.py --busy 2            # with 2 busy processes beside it (a loaded machine)
    python benchmarks/ui_start.py --source ../main    # another checkout's app (before and after a change)

Each round starts `python -m s3gym_tui --db DB` in a pseudo-terminal (the app draws as it does for a
person), feeds what it writes to a terminal emulator (pyte) and times, from the spawn:
- first drawn: the first moment the terminal shows any character (the start line, once there is one);
- app drawn: the app's own first frame (its splash, or Home itself);
- Home ready: the recent runs are listed (the Home screen in full);
- then `?` is sent: help drawn (Home is covered: the help screen's first frame) and help ready (its
  key tables shown);
- then ctrl+q: the process's exit.
Then, in a fresh interpreter each, how long the modules the start needs take to import (the figures
that grow most on a loaded machine). The load average is printed with the table: on a shared machine
wall time follows the load.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._util import print_table  # noqa: E402

FRAME_END = b"\x1b[?2026l"  # Textual ends each frame with the end of a synchronized update
HOME_READY = "Recent runs ("  # the runs panel's title once the runs are listed
HELP_READY = "Close help"
STARTING = "starting s3gym"  # the start line on the terminal before the app's screen  # the help's footer key (the key tables are drawn in the same frame)
IMPORTS = ("s3gym_tui.cli", "s3gym_tui.app", "s3gym_tui.store", "s3gym_tui.screens.home",
           "s3gym_tui.screens.help")


def build_db(path: Path) -> None:
    """Scripted Trust and Snake runs (History, Summary): a small database like a first day's."""
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store

    with Store(path) as store:
        for game, pathway in (("trust", "history"), ("trust", "summary"), ("snake", "summary")):
            run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                                  explore_episodes=3, eval_every=3, eval_episodes=1))
            asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


class AppInTerminal:
    """The app as its own process in a pseudo-terminal of `size`, its output fed to pyte."""

    def __init__(self, db: Path, size: tuple[int, int], config: Path, source: Path = ROOT) -> None:
        import pyte

        columns, lines = size
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines),
               "S3GYM_CONFIG": str(config), "PYTHONPATH": str(source), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, "-m", "s3gym_tui", "--db", str(db)], stdin=slave,
                                        stdout=slave, stderr=slave, env=env, cwd=source, start_new_session=True)
        os.close(slave)

    @property
    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait_for(self, condition: Callable[[str], bool], timeout: float = 120.0) -> Optional[float]:
        """Seconds since the spawn when `condition(screen text)` first held, or None (timeout, exit)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self.text):
                return time.monotonic() - self.started
            ready, _, _ = select.select([self.master], [], [], 0.01)
            if ready:
                try:
                    data = os.read(self.master, 1 << 16)
                except OSError:
                    return None
                if not data:
                    return None
                parts = data.split(FRAME_END)
                for n, part in enumerate(parts):  # frame by frame, as the terminal showed them
                    self.stream.feed(part + (FRAME_END if n < len(parts) - 1 else b""))
                    if condition(self.text):
                        return time.monotonic() - self.started
            elif self.process.poll() is not None:
                return None
        return None

    def send(self, keys: str) -> float:
        os.write(self.master, keys.encode())
        return time.monotonic() - self.started

    def drain_until_exit(self, timeout: float = 60.0) -> Optional[float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return time.monotonic() - self.started
            ready, _, _ = select.select([self.master], [], [], 0.01)
            if ready:
                try:
                    os.read(self.master, 1 << 16)
                except OSError:
                    pass
        return None

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)


def one_round(db: Path, size: tuple[int, int], config: Path, source: Path = ROOT) -> list[Optional[float]]:
    app = AppInTerminal(db, size, config, source)
    try:
        first = app.wait_for(lambda text: text.strip() != "")
        drawn_app = app.wait_for(lambda text: "s3gym" in text and STARTING not in text)
        home = app.wait_for(lambda text: HOME_READY in text)
        asked = app.send("?")
        drawn = app.wait_for(lambda text: HOME_READY not in text)
        ready = app.wait_for(lambda text: HELP_READY in text)
        quit_at = app.send("\x11")  # ctrl+q
        exited = app.drain_until_exit()
    finally:
        app.close()

    def since(at: Optional[float], start: Optional[float]) -> Optional[float]:
        return None if at is None or start is None else at - start

    return [first, drawn_app, home, since(drawn, asked), since(ready, asked), since(exited, quit_at)]


def import_seconds(module: str, source: Path = ROOT) -> float:
    """A fresh interpreter's import of `module` after the modules listed before it (the app's order)."""
    before = IMPORTS[:IMPORTS.index(module)]
    code = ("import time, importlib\n" + "".join(f"import {m}\n" for m in before)
            + f"t = time.perf_counter()\nimportlib.import_module({module!r})\nprint(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=source, check=True,
                         env={**os.environ, "PYTHONPATH": str(source), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return float(out.stdout.strip().splitlines()[-1])


def busy(n: int) -> list[subprocess.Popen]:
    """`n` processes spinning a core each (the load other work puts on a shared machine)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def fmt(value: Optional[float]) -> str:
    return "—" if value is None else f"{value * 1000:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", type=Path, help="an existing database (default: a small scripted one)")
    parser.add_argument("--size", default="120x40", help="the terminal, COLUMNSxLINES")
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the app (default 0)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the s3gym checkout whose app is started "
                        "(default: this one)")
    args = parser.parse_args()
    source = args.source.resolve()
    size = tuple(int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="ui-start-") as folder:
        config = Path(folder) / "config.toml"
        config.write_text('theme = "dark"\ndefault_model = "scripted/trust"\n')
        db = args.db
        if db is None:
            db = Path(folder) / "start.db"
            build_db(db)
        spinners = busy(args.busy)
        try:
            rows = []
            for n in range(args.rounds):
                rows.append([f"round {n + 1}", *(fmt(v) for v in one_round(db, size, config, source))])
            imports = [[module, fmt(import_seconds(module, source))] for module in IMPORTS]
        finally:
            for process in spinners:
                process.kill()
                process.wait()
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print_table(f"{source}: app start and help at {size[0]}x{size[1]}, ms from the spawn (help: from the key; "
                f"quit: from ctrl+q) · {args.busy} busy process(es) · load average {load}",
                ["round", "first drawn", "app drawn", "Home ready", "help drawn", "help ready", "quit"], rows)
    print_table("imports in a fresh interpreter, each after the ones above it (ms)", ["module", "import"], imports)


if __name__ == "__main__":
    main()
