"""Something is on the terminal at once: while the app starts (its imports, the database check, Home
composing) and while the help reads the keys of every screen. Timings are measured by
benchmarks/ui_start.py; here only what is shown, and in which order."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from benchmarks.ui_start import HOME_READY, AppInTerminal
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.screens import help as help_screen
from s3gym_tui.screens.help import HelpScreen
from s3gym_tui.screens.home import HomeScreen
from tests.ui.settle import settle

SETTINGS = Settings(default_model="scripted/trust", theme="dark", human_name="t")


ROOT = Path(__file__).resolve().parents[2]


def test_the_store_loads_without_pandas_and_numpy():
    """sqlite_utils imports both when installed (~1 s of every start on a 2-core machine), for types the
    store never infers; they stay importable for what needs them (training)."""
    code = ("import importlib.util, sys\n"
            "import s3gym_tui.store\n"
            "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))\n"
            "for m in ('pandas', 'numpy'):\n"
            "    if importlib.util.find_spec(m):\n"
            "        importlib.import_module(m)\n"
            "print('importable')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "importable"], out.stdout


def test_the_terminal_shows_the_start_before_home(demo_db, tmp_path):
    """A real terminal (a pseudo-terminal read by a terminal emulator): the first thing on it says
    s3gym is starting, and the app's first frame names the database it opens, before Home."""
    path, _ = demo_db
    config = tmp_path / "config.toml"
    config.write_text('theme = "dark"\ndefault_model = "scripted/trust"\n')
    app = AppInTerminal(path, (120, 40), config)
    shown: list[str] = []

    def record(text: str) -> bool:
        if text.strip() and (not shown or shown[-1] != text):
            shown.append(text)
        return HOME_READY in text

    try:
        assert app.wait_for(record, timeout=180) is not None, f"Home never came; last screen:\n{shown[-1:]}"
        app.send("\x11")
        assert app.drain_until_exit() is not None
    finally:
        app.close()
    before_home = [text for text in shown if HOME_READY not in text]
    assert before_home, "nothing was on the terminal before Home"
    assert "starting s3gym" in before_home[0]
    assert any(Path(path).name in text and "opening" in text for text in before_home), before_home


async def test_help_opens_at_once_and_reads_the_keys_off_the_ui_thread(demo_db, monkeypatch):
    release = threading.Event()
    made = help_screen.help_lines

    def slow_lines(app, width):  # a loaded machine: seconds
        assert threading.current_thread() is not threading.main_thread()
        release.wait(60)
        return made(app, width)

    monkeypatch.setattr(help_screen, "help_lines", slow_lines)
    help_screen._RENDERED.clear()  # an earlier test's help at this width would be shown at once
    app = S3GymApp(db_path=demo_db[0], settings=SETTINGS)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen) and screen.busy
        assert screen.query_one("#help-text").text == help_screen.READING
        release.set()
        await settle(pilot)
        text = screen.query_one("#help-text").text
        assert "Take over" in text and "Hint Messages" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        release.clear()  # a second opening at the same width shows the text made the first time
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and not app.screen.busy
        assert app.screen.query_one("#help-text").text == text
        release.set()


async def test_help_can_be_closed_while_it_reads(demo_db, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(help_screen, "help_lines", lambda app, width: release.wait(60) and [])
    help_screen._RENDERED.clear()
    app = S3GymApp(db_path=demo_db[0], settings=SETTINGS)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        release.set()
        await settle(pilot)
        assert isinstance(app.screen, HomeScreen)
