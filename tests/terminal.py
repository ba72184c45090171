"""A terminal for the gate's tests: what a program wrote, fed to a terminal emulator (pyte), and the
checks that nothing it printed took control of the terminal: the title and icon name unchanged, no
OSC (clipboard, links, title), DCS, APC, PM or SOS introduced, nothing drawn or erased outside the
program's own region, and no control character left once the program's own sequences are known."""

from __future__ import annotations

import os
import re
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pyte

SENTINEL = "░"
# Sequences that start a string command (title, clipboard, links, device control, ...), 7- and 8-bit.
STRING_COMMAND = re.compile("\x1b[\\]P_^X]|[\x90\x98\x9d\x9e\x9f]")
# What must never reach a terminal raw: C0 (but \n), DEL, C1, bidi controls, zero-width and tag characters.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
                 "\U000e0000-\U000e007f]")
# The sequences Rich writes for its own colours and live displays, and those Textual writes for a frame.
RICH_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[hl]|\x1b\[2K|\x1b\[[0-9]*[AG]|\r")
# Textual's pointer shape (OSC 22): pyte reads any OSC starting with 2 as a title, so it is left out of
# what the emulator is fed (it is still checked against TEXTUAL_OWN with everything else).
POINTER_SHAPE = re.compile(r"\x1b\]22;[a-z-]+\x07")
TEXTUAL_OWN = re.compile(r"\x1b\[[0-9;]*m|\x1b\[[0-9]+;[0-9]+H|\x1b\[\?(?:25|2026|1004|1049)[hl]"
                         r"|\x1b\]22;[a-z-]+\x07")


class Terminal:
    """A pyte screen of `columns` x `lines`, optionally with a region (the program's) inside it
    and SENTINEL everywhere else; `above` lines of sentinel text printed first (a shell's history)."""

    def __init__(self, columns: int, lines: int, region: Optional[tuple[int, int]] = None, above: int = 0) -> None:
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.Stream(self.screen)
        self.region = region
        self.above = above
        self.written: list[str] = []
        if region is not None:
            width, height = region
            for y in range(lines):
                for x in range(columns):
                    if x >= width or y >= height:
                        self.stream.feed(f"\x1b[{y + 1};{x + 1}H{SENTINEL}")
            self.stream.feed("\x1b[H")
        for n in range(above):
            self.stream.feed(f"{SENTINEL} shell line {n}\r\n")

    def feed(self, text: str) -> None:
        self.written.append(text)
        self.stream.feed(POINTER_SHAPE.sub("", text))

    @property
    def output(self) -> str:
        return "".join(self.written)

    @property
    def display(self) -> list[str]:
        return self.screen.display

    @property
    def shown(self) -> str:
        return "\n".join(line.rstrip() for line in self.display)

    def problems(self, own: re.Pattern) -> list[str]:
        """What went wrong (empty when the terminal is untouched): `own` matches the program's own
        control sequences (Rich's, Textual's)."""
        found = []
        if self.screen.title or self.screen.icon_name:
            found.append(f"the title became {self.screen.title[:40]!r} (icon {self.screen.icon_name[:40]!r})")
        leftover = own.sub("", self.output)
        command = STRING_COMMAND.search(leftover)
        if command:
            found.append(f"a string command (OSC/DCS/APC) was written: "
                         f"{leftover[max(0, command.start() - 20):command.start() + 30]!r}")
        leftover = leftover.replace("\n", "")
        raw = RAW.search(leftover)
        if raw:
            found.append(f"a raw control reached the terminal: {leftover[max(0, raw.start() - 20):raw.end() + 20]!r}")
        if self.region is not None:
            width, height = self.region
            for y, line in enumerate(self.display):
                outside = line[width:] if y < height else line
                if outside.strip(SENTINEL):
                    found.append(f"line {y} changed outside the program's region: {outside.rstrip()!r}")
                    break
            if not (0 <= self.screen.cursor.x <= width and 0 <= self.screen.cursor.y < height):
                found.append(f"the cursor left the region: {self.screen.cursor.x},{self.screen.cursor.y}")
        for n in range(self.above):
            if not self.display[n].startswith(f"{SENTINEL} shell line {n}"):
                found.append(f"the shell's line {n} above the output changed: {self.display[n].rstrip()!r}")
                break
        return found

    def plain_text_cursor_problem(self) -> Optional[str]:
        """Where plain text leaves the cursor: column 0 of the line after the last line printed."""
        last = max((y for y, line in enumerate(self.display) if line.strip()), default=-1)
        cursor = self.screen.cursor
        if (cursor.x, cursor.y) != (0, last + 1):
            return f"the cursor is at {cursor.x},{cursor.y}, not at the start of the line after the output ({last + 1})"
        return None


MARK = "@@s3gym-test-command"
DRIVER = f"""
import json, sys
from s3gym_tui.cli import main
for n, args in enumerate(json.loads(sys.argv[1])):
    sys.stdout.write("{MARK} %d start@@\\n" % n); sys.stdout.flush()
    code = main(args)
    sys.stdout.flush(); sys.stderr.flush()
    sys.stdout.write("{MARK} %d exit %d@@\\n" % (n, code)); sys.stdout.flush()
"""


def run_cli_in_pty(commands: Sequence[Sequence[str]], env: dict, columns: int = 160, lines: int = 50,
                   timeout: float = 300.0, cwd: Optional[Path] = None) -> list[tuple[int, str]]:
    """Run `s3gym ARGS` for each of `commands`, one after another in one process whose stdout and stderr
    are a pseudo-terminal of that size (what a person's terminal is: colours, live progress bars);
    returns each command's exit code and everything it wrote, as the terminal received it."""
    import fcntl
    import json
    import pty
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    process = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps([list(c) for c in commands])],
                               stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                               env={**env, "COLUMNS": str(columns), "LINES": str(lines), "TERM": "xterm-256color"},
                               cwd=cwd, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                raise AssertionError(f"the commands did not finish in {timeout} s: {commands}")
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
        process.wait(timeout=30)
    finally:
        os.close(master)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    results = []
    for n in range(len(commands)):
        match = re.search(rf"{MARK} {n} start@@\r?\n(.*?){MARK} {n} exit (-?\d+)@@", text, re.S)
        if match is None:
            raise AssertionError(f"command {n} ({commands[n][:2]}) did not finish: {text[-2000:]}")
        results.append((int(match.group(2)), match.group(1)))
    return results
