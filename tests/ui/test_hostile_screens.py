"""Hostile text on every screen: with a database full of tests/hostile.py's corpus (replies, actions,
feedback, prompts, summaries, stop reasons, notes, run ids, model names, api bases, a person's name)
and a live model answering with it, every screen and dialog is opened with Pilot while the app writes
its frames to a capturing driver, as it would to a terminal. A terminal emulator (pyte) replays those
bytes: the title never changes, no OSC/DCS is written (no clipboard), nothing is drawn outside the
app's region, no raw control reaches the terminal, and the hostile text is on the screen, visibly."""

from __future__ import annotations

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import Input

from s3gym_tui.app import S3GymApp
from s3gym_tui.config import ModelSettings, Settings
from s3gym_tui.store import Store
from tests.fake_openai import FakeOpenAI
from tests.hostile import CORPUS, ERROR_BODY, MODEL, hostile_db, hostile_template, reply_for, short  # noqa: F401
from tests.terminal import TEXTUAL_OWN, Terminal
from tests.ui.settle import settle

SIZE = (120, 40)
SHOWN = "␛"  # an ESC, once gated


class CapturingDriver(HeadlessDriver):
    """The headless driver, except that the app draws its frames as for a terminal: every byte it
    writes is kept in `app.terminal_output`. (App.driver_class is public; `is_headless` False is what
    makes the app render to its driver.)"""

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        self._app.terminal_output.append(data)


@pytest.fixture
def server():
    with FakeOpenAI(reply=reply_for) as fake:
        yield fake


@pytest.fixture
def app(hostile_db, server):
    path, ids = hostile_db
    settings = Settings(default_model=MODEL, theme="dark", human_name="tester" + short("osc2-st"),
                        models={MODEL: ModelSettings(api_base=server.base)})
    app = S3GymApp(db_path=path, settings=settings)
    app.driver_class = CapturingDriver
    app.terminal_output = []
    app.ids = ids
    return app


def replay(app) -> Terminal:
    terminal = Terminal(SIZE[0] + 8, SIZE[1] + 4, region=SIZE)
    terminal.feed("".join(app.terminal_output))
    return terminal


async def check(pilot, what: str, visible: bool = True) -> list[str]:
    """What went wrong on the screen shown now (after everything the app wrote so far)."""
    await settle(pilot)
    await pilot.pause(0.05)
    terminal = replay(pilot.app)
    problems = terminal.problems(TEXTUAL_OWN)
    if not pilot.app.terminal_output:
        problems.append("the app wrote nothing (the capturing driver is not used)")
    if visible and SHOWN not in terminal.shown:
        problems.append(f"no hostile text is shown ({SHOWN} missing):\n{terminal.shown}")
    return [f"{what}: {p}" for p in problems]


async def step_until(pilot, screen, count: int) -> None:
    for _ in range(400):
        if len(screen.steps) >= count and not screen.thinking:
            return
        await pilot.pause(0.05)
    raise AssertionError(f"no step {count} (error: {screen.error})")


# ----- one scenario per screen (and its dialogs) ----------------------------------------------------
async def home(pilot, app):
    from s3gym_tui.screens.home_runs import RunsPanel
    from s3gym_tui.widgets.table import DataTable

    problems = await check(pilot, "home")
    table = app.screen.query_one("#runs", DataTable)
    table.move_cursor(row=table.get_row_index(app.ids["named"]))  # its note, stop reason, api base
    problems += await check(pilot, "home, the hostile run's details")
    assert app.screen.query_one(RunsPanel).selected_run_id == app.ids["named"]
    app.screen.action_delete_run()
    problems += await check(pilot, "delete dialog")
    await pilot.press("escape")
    table.move_cursor(row=table.get_row_index(app.ids["played"]))
    await pilot.pause()
    app.screen.action_open_episodes()
    problems += await check(pilot, "episode picker")
    await pilot.press("escape")
    return problems


async def home_forms(pilot, app):
    """The model picker, the run dialog and the model settings dialog with a hostile model name and api base."""
    from s3gym_tui.screens.dialogs import ModelSettingsDialog
    from s3gym_tui.screens.run_dialog import RunDialog

    app.settings = app.settings.with_model_settings(MODEL, ModelSettings(api_base="http://x/" + short("osc52-st")))
    app.screen.query_one("#pathway").value = "summary"  # the runs to draw experience from
    problems = await check(pilot, "home, the model typed and the runs select")
    app.screen.action_start_run()
    await pilot.pause()
    assert isinstance(app.screen, RunDialog)
    problems += await check(pilot, "run dialog")
    await pilot.press("escape")
    await pilot.pause()
    app.screen.query_one("#model-settings").press()
    await pilot.pause()
    assert isinstance(app.screen, ModelSettingsDialog)
    problems += await check(pilot, "model settings dialog")
    await pilot.press("escape")
    return problems


async def replay_and_fork(pilot, app):
    from s3gym_tui.screens.dialogs import ForkDialog

    app.open_episode(app.ids["episode"])
    problems = await check(pilot, "play replay")
    for _ in range(3):  # the reported case: → redrew the rows and the board with the raw action
        await pilot.press("right")
        problems += await check(pilot, "play replay after →")
    await pilot.press("f")
    await pilot.pause()
    assert isinstance(app.screen, ForkDialog)
    problems += await check(pilot, "fork dialog")
    await pilot.press("escape")
    return problems


async def live_play(pilot, app, server):
    from s3gym_tui.screens.dialogs import TextInputDialog

    app.open_play(game="trust", mode="explore", seed=7, model=MODEL, pathway="summary",
                  source_run_id=app.ids["played"])  # the hostile summary rides in the prompt
    await pilot.pause()
    screen = app.screen
    await pilot.press("n")
    await step_until(pilot, screen, 1)
    problems = await check(pilot, "play live, a hostile reply stored")
    await pilot.press("p", "n")  # propose-then-wait: the proposal bar shows the hostile action
    for _ in range(400):
        if screen.proposal is not None:
            break
        await pilot.pause(0.05)
    problems += await check(pilot, "play live, a hostile proposal")
    await pilot.press("e")
    await pilot.pause()
    assert isinstance(app.screen, TextInputDialog)
    problems += await check(pilot, "edit the proposal dialog")
    await pilot.press("escape")
    await pilot.press("v")
    server.behave(times=None, status=400, raw_body=ERROR_BODY)
    await pilot.press("n")  # the call fails: its error (the 400's hostile message) is notified
    problems += await check(pilot, "play live, the 400 as a notification")
    assert len(screen.steps) == 1 and server.requests[-1]["path"].endswith("/chat/completions")
    return problems


async def protocol(pilot, app):
    app.open_protocol(app.ids["named"])
    problems = await check(pilot, "protocol, the hostile run")
    await pilot.press("escape")
    app.open_protocol(app.ids["played"])
    problems += await check(pilot, "protocol, the played run (board, summary)")
    await pilot.press("escape")
    app.open_protocol("nosuch-" + short("osc0-bel"))
    problems += await check(pilot, "protocol, a hostile id that does not exist")
    return problems


async def summaries(pilot, app):
    from s3gym_tui.screens.summaries import SummaryEditor

    app.open_summaries(app.ids["played"])
    problems = await check(pilot, "summaries")
    await pilot.press("d")
    problems += await check(pilot, "summaries, diff")
    await pilot.press("e")
    await pilot.pause()
    assert isinstance(app.screen, SummaryEditor)
    problems += await check(pilot, "summary editor")
    await pilot.press("escape")
    return problems


async def compare(pilot, app):
    with Store(app.db_path) as store:
        episodes = [e.id for e in store.episodes.list(app.ids["played"])]
    app.open_compare(episodes[0], episodes[1])
    problems = await check(pilot, "compare")
    await pilot.press("n", "n")
    problems += await check(pilot, "compare, stepped")
    return problems


async def pairs(pilot, app):
    app.open_pairs()
    return await check(pilot, "pairs")


async def report(pilot, app):
    app.open_report([app.ids[k] for k in ("played", "paired", "stopped", "named")])
    problems = await check(pilot, "report")
    await pilot.press("a")
    problems += await check(pilot, "report, the run list")
    return problems


async def training(pilot, app):
    app.open_training(app.ids["played"])
    return await check(pilot, "training")


async def sweeps(pilot, app):
    app.open_sweeps(app.ids["sweep"])
    return await check(pilot, "sweeps")


async def aspire(pilot, app):
    """The ASPIRE screen on a run whose every text is hostile: the timeline, the chosen decision whole, the
    candidate tree, claimed vs measured; then the runs picker and the new-run dialog."""
    app.open_aspire(app.ids["aspire"])
    problems = await check(pilot, "aspire")
    await pilot.press("c", "down")
    problems += await check(pilot, "aspire, a candidate chosen")
    await pilot.press("l")
    problems += await check(pilot, "aspire, the runs picker")
    await pilot.press("escape", "n")
    problems += await check(pilot, "aspire, the new-run dialog", visible=False)
    return problems


async def search(pilot, app):
    """`/`, a word of the hostile corpus, the results (highlighted), the mark dialog and replay at a hit."""
    with Store(app.db_path) as store:
        episode = store.episodes.list(app.ids["played"])[0]
        store.annotations.add_annotation("episode", "insight", author="human:x", episode_id=episode.id,
                                         note="pwned " + CORPUS["report-payload"] + CORPUS["bidi-rlo"])
    await pilot.press("slash")
    await pilot.pause()
    app.screen.query_one("#search-input").value = "pwned"
    await pilot.press("enter")
    problems = await check(pilot, "search results")
    await pilot.press("down", "m")
    problems += await check(pilot, "search, the mark dialog", visible=False)
    await pilot.press("escape", "enter")
    problems += await check(pilot, "search, a hit opened in replay")
    return problems


async def help_screen(pilot, app):
    app.action_help()
    return await check(pilot, "help", visible=False)  # no stored text: the check is that it stays clean


SCENARIOS = {"home": home, "home forms": home_forms, "replay and fork": replay_and_fork, "live play": live_play,
             "protocol": protocol, "summaries": summaries, "compare": compare, "pairs": pairs, "report": report,
             "training": training, "sweeps": sweeps, "aspire": aspire, "search": search, "help": help_screen}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_hostile_text_never_drives_the_terminal(app, server, name):
    scenario = SCENARIOS[name]
    async with app.run_test(headless=False, size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        if scenario is live_play:
            problems = await scenario(pilot, app, server)
        else:
            problems = await scenario(pilot, app)
    assert not problems, "\n".join(problems)


def test_stored_text_stays_exact(hostile_db):
    """The gate changes what is shown, never what is stored: the corpus is in the database as it came."""
    from tests.hostile import stored_texts

    path, _ = hostile_db
    texts = "\n".join(stored_texts(path))
    for name in ("report-payload", "osc52-st", "c1-csi", "bidi-rlo", "tag-chars"):
        assert CORPUS[name] in texts, name
