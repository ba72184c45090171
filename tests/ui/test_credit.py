"""The credit view: `w` in Play (replay, live, fork) and Compare opens an episode's credit per action;
an evidence link opens the sibling episode at its step; credit not computed is said, and computed on
request in a worker with progress and cancel; model text is gated."""

from __future__ import annotations

import threading

import pytest
from rich.console import Console
from rich.text import Text

from textual.widgets import Input

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.credit_score import DEFAULT_OPEN_SCORER
from s3gym_tui.screens.dialogs import TextInputDialog
from s3gym_tui.engine.glossary import fmt_metric, fmt_signed
from s3gym_tui.screens.credit import NO_ITEM, CreditScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.agent_panel import AgentPanel
from s3gym_tui.widgets.credit_bar import UNIFORM_MARK, bar_cells, weight_bar
from s3gym_tui.widgets.credit_panel import CreditPanel
from tests.ui.analysis_data import (DIVERGING_HISTORY, DIVERGING_SUMMARY, analysis_db,  # noqa: F401
                                    analysis_template)
from tests.ui.credit_data import EPS_W, ITEMS, STEP_WITH_EVIDENCE, add_credit, add_group_credit
from tests.training.conftest import tiny_base  # noqa: F401 - the tiny random model fixture
from tests.ui.settle import settle, until

UNCOMPUTED = "trust-history-demo-c000-e0"  # a sibling of the group: no credit stored for it


@pytest.fixture
def credit_db(analysis_db):
    with Store(analysis_db) as store:
        weights = add_group_credit(store)
    return analysis_db, weights


def plain(renderable) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def detail_lines(screen: CreditScreen) -> list[str]:
    detail = screen.query_one("#credit-detail")
    return [plain(detail.get_option_at_index(i).prompt).rstrip() for i in range(detail.option_count)]


# ----- the bar ------------------------------------------------------------------------------------
def test_the_bar_is_centred_on_the_uniform_line_and_reaches_the_bounds():
    width = 11
    assert weight_bar(1.0, 0.5, width).plain == "·····│·····"
    assert weight_bar(1.5, 0.5, width).plain == "·····│█████"
    assert weight_bar(0.5, 0.5, width).plain == "█████│·····"
    assert bar_cells(1.25, 0.5, width) == 3 and bar_cells(0.75, 0.5, width) == -3
    assert bar_cells(1.001, 0.5, width) == 0  # under half a cell: a half block against the line
    assert weight_bar(1.001, 0.5, width).plain == "·····│▌····" and weight_bar(0.999, 0.5, width).plain == "····▐│·····"
    assert weight_bar(None, 0.5, width).plain.strip() == "—"  # undefined: never a bar at 1 or at 0
    assert UNIFORM_MARK not in weight_bar(None, 0.5, width).plain


# ----- the path a person takes --------------------------------------------------------------------
async def test_w_in_a_replay_shows_the_weights_and_an_evidence_link_opens_the_sibling_at_that_step(
        credit_db, settings):
    path, weights = credit_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_episode(DIVERGING_HISTORY)
        await settle(pilot)
        for _ in range(STEP_WITH_EVIDENCE + 1):  # the start, then steps 0..2
            await pilot.press("right")
        await pilot.press("w")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CreditScreen) and screen.episode_ids == [DIVERGING_HISTORY]
        panel = screen.query_one(CreditPanel)
        table = panel.table
        stored = Store(path).episodes.steps(DIVERGING_HISTORY, include_prompt=False)
        assert table.row_count == len(stored) == len(weights[DIVERGING_HISTORY])
        for row, (step, w) in enumerate(zip(stored, weights[DIVERGING_HISTORY])):
            cells = table.full_row(f"s{step.index}")
            assert cells[0].plain == str(step.index) and cells[1].plain == step.action
            assert cells[2].plain == weight_bar(w, EPS_W, len(cells[2].plain)).plain  # the bar of that weight
            assert cells[3].plain == fmt_metric(w, 3)
            assert cells[6].plain == fmt_signed(panel.credit.advantage)  # the uniform line: A for every step
        # weights move credit between the steps only: they average 1, and steps without PI keep 1
        assert abs(sum(weights[DIVERGING_HISTORY]) / len(stored) - 1) < 1e-9
        assert table.full_row("s1")[3].plain == "1.000" and table.full_row("s1")[4].plain == "—"  # no aligned PI
        # opened at the step in view; its aligned item and both evidence links below
        assert table.cursor_row == STEP_WITH_EVIDENCE
        lines = detail_lines(screen)
        assert ITEMS[0]["requirement"] in lines[0] and ITEMS[0]["condition"] in lines[0]
        links = [line for line in lines if "→ evidence" in line]
        assert len(links) == 2  # the evidence in stored order (by episode id)
        assert "trust-summary-demo-c000-e0 step 2: cheat" in links[0] and f"{DIVERGING_SUMMARY} step 2" in links[1]
        # Enter on the step goes to its links; Enter on the first opens that sibling at that step
        await pilot.press("enter")
        await pilot.press("enter")
        await settle(pilot)
        play = app.screen
        assert isinstance(play, PlayScreen) and play.episode.id == "trust-summary-demo-c000-e0"
        sibling = Store(path).episodes.steps("trust-summary-demo-c000-e0", include_prompt=False)
        assert play.position == 3 and play.steps[play.position - 1].index == 2
        assert play.steps[2].action == sibling[2].action
        assert "Feedback of step 2" in play.query_one(AgentPanel).query_one("#agent-feedback").full.plain


async def test_a_click_on_an_evidence_link_opens_it(credit_db, settings):
    path, _ = credit_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([DIVERGING_HISTORY], at_step=0)
        await settle(pilot)
        lines = detail_lines(app.screen)
        assert ITEMS[1]["requirement"] in lines[0] and "trust-history-demo-c000-e0 step 0" in lines[1]
        await pilot.click("#credit-detail", offset=(8, 3))  # border, the item's two lines, the link
        await settle(pilot)
        assert isinstance(app.screen, PlayScreen) and app.screen.episode.id == "trust-history-demo-c000-e0"
        assert app.screen.position == 1


async def test_a_step_without_pi_says_so_and_w_works_in_a_live_episode(credit_db, settings):
    path, _ = credit_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([DIVERGING_HISTORY], at_step=1)
        await settle(pilot)
        assert detail_lines(app.screen) == [NO_ITEM]
        await pilot.press("escape")
        app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust")
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        live = app.screen
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, CreditScreen) and app.screen.episode_ids == [live.episode.id]
        assert "Credit not computed yet" in str(app.screen.query_one(".credit-missing").content)


async def test_compare_shows_both_sides_credit(credit_db, settings):
    path, weights = credit_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        app.open_compare(DIVERGING_HISTORY, DIVERGING_SUMMARY)
        await settle(pilot)
        await pilot.press("g")  # the first divergence: step 2
        await pilot.press("w")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CreditScreen) and screen.episode_ids == [DIVERGING_HISTORY, DIVERGING_SUMMARY]
        a, b = screen.panels
        assert "A · credit of " + DIVERGING_HISTORY in str(a.border_title)
        assert "B · credit of " + DIVERGING_SUMMARY in str(b.border_title)
        for panel, episode in ((a, DIVERGING_HISTORY), (b, DIVERGING_SUMMARY)):
            assert [panel.table.full_row(f"s{i}")[3].plain for i in range(len(weights[episode]))] == \
                [fmt_metric(w, 3) for w in weights[episode]]
            assert panel.table.cursor_row == 2
        # B's side: its step 2 had the same item, with B itself among the evidence
        b.table.focus()
        await pilot.pause()
        assert screen.query_one("#credit-detail").border_title.startswith("B · step 2")


async def test_not_computed_is_said_and_c_computes_in_a_worker_with_progress(credit_db, settings, monkeypatch):
    path, _ = credit_db
    seen: list[tuple] = []

    scorers = []

    def fake_compute(store, episode_id, scorer, progress):
        """The engine's computation, as the worker calls it: progress per part, then stored credit."""
        scorers.append(scorer)
        for done in range(3):
            progress(done, 3, f"part {done}")
            seen.append((episode_id, done, threading.current_thread() is threading.main_thread()))
        from tests.ui.credit_data import SHIFTS
        SHIFTS[episode_id] = {0: ([0.5], [1])}
        try:
            extraction = store.credit.credit_rows(DIVERGING_HISTORY)["credit"]["extraction_id"]
            add_credit(store, episode_id, extraction)
        finally:
            del SHIFTS[episode_id]

    monkeypatch.setattr("s3gym_tui.screens.credit.compute_episode_credit", fake_compute)
    progressed = []
    monkeypatch.setattr(CreditPanel, "show_progress",
                        lambda self, done, total, what, _orig=CreditPanel.show_progress:
                        (progressed.append((done, total)), _orig(self, done, total, what)))
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.open_credit([UNCOMPUTED])
        await settle(pilot)
        screen = app.screen
        panel = screen.query_one(CreditPanel)
        missing = str(screen.query_one(".credit-missing").content)
        assert "Credit not computed yet" in missing and "c computes it" in missing
        assert not panel.table.display or panel.has_class("-missing")  # no table of zeros or ones
        assert "no credit computed" in detail_lines(screen)[0]
        await pilot.press("c")
        await settle(pilot)
        # the scripted player cannot score a given completion: said, and an open scorer offered
        dialog = app.screen
        assert isinstance(dialog, TextInputDialog) and "scripted/trust cannot score" in dialog.hint
        assert dialog.query_one(Input).value == DEFAULT_OPEN_SCORER
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen and scorers == [DEFAULT_OPEN_SCORER]
        assert [s[:2] for s in seen] == [(UNCOMPUTED, 0), (UNCOMPUTED, 1), (UNCOMPUTED, 2)]
        assert not any(on_main for *_, on_main in seen)  # off the UI thread
        assert (2, 3) in progressed
        assert panel.credit is not None and not panel.has_class("-missing")
        assert Store(path).credit.credit_rows(UNCOMPUTED) is not None
        assert panel.table.full_row("s0")[7].plain == "1 item"


async def test_cancel_stops_the_computation_and_nothing_is_stored(credit_db, settings, monkeypatch):
    path, _ = credit_db
    started, released = threading.Event(), threading.Event()

    def slow_compute(store, episode_id, scorer, progress):
        progress(0, 10, "reading the siblings")
        started.set()
        for done in range(1, 10):
            released.wait(5)
            progress(done, 10, "scoring")  # raises once the worker is cancelled
        raise AssertionError("not cancelled")

    monkeypatch.setattr("s3gym_tui.screens.credit.compute_episode_credit", slow_compute)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([UNCOMPUTED])
        await settle(pilot)
        screen = app.screen
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("enter")  # the open scorer offered
        await until(pilot, started.is_set, what="the computation to start")
        assert screen.busy and screen.query_one(CreditPanel).has_class("-computing")
        await pilot.press("x")
        released.set()
        await until(pilot, lambda: not screen.busy, what="the computation to end")
        await settle(pilot)
        assert app.screen is screen  # cancelling does not leave the view
        assert Store(path).credit.credit_rows(UNCOMPUTED) is None
        assert "Credit not computed yet" in str(screen.query_one(".credit-missing").content)
        assert not screen.query_one(CreditPanel).has_class("-computing")


async def test_a_failed_computation_is_one_line_and_the_view_stays(credit_db, settings, monkeypatch):
    path, _ = credit_db

    def failing(store, episode_id, scorer, progress):
        raise RuntimeError("provider openai/gpt-4.1 cannot score a given completion;\nchoose a scorer")

    monkeypatch.setattr("s3gym_tui.screens.credit.compute_episode_credit", failing)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([UNCOMPUTED])
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        missing = str(app.screen.query_one(".credit-missing").content)
        assert "The last attempt failed: provider openai/gpt-4.1 cannot score a given completion; choose" in missing


async def test_hostile_pi_text_reaches_the_screen_gated(analysis_db, settings):
    from tests.hostile import CORPUS
    from tests.terminal import RAW

    hostile = list(CORPUS.values())
    items = [{"requirement": text, "condition": hostile[-1 - n], "cues": [],
              "evidence": [(DIVERGING_SUMMARY, 2)]} for n, text in enumerate(hostile[:6])]
    with Store(analysis_db) as store:
        add_group_credit(store, items=items)
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([DIVERGING_HISTORY], at_step=STEP_WITH_EVIDENCE)
        await settle(pilot)
        detail = app.screen.query_one("#credit-detail")
        prompts = [detail.get_option_at_index(i).prompt for i in range(detail.option_count)]
        assert prompts and all(isinstance(p, Text) for p in prompts)
        for prompt in prompts:
            assert not RAW.search(prompt.plain), prompt.plain


# ----- the engine's own computation, from the view ---------------------------------------------------
async def test_c_computes_with_the_engine_and_a_chosen_open_scorer(analysis_db, settings, tiny_base, monkeypatch):
    """No fake: the scripted analyzer writes PI from the successful sibling, a tiny local Hugging Face
    model (chosen in the dialog) scores the shifts, and the view shows what the store then holds."""
    import sqlite3

    heard = []
    monkeypatch.setattr(CreditPanel, "show_progress",
                        lambda self, done, total, what, _orig=CreditPanel.show_progress:
                        (heard.append((done, total, what)), _orig(self, done, total, what)))

    from s3gym_tui.engine.credit import episode_credit

    conn = sqlite3.connect(analysis_db)  # one sibling judged itself higher: self-judged success
    with conn:
        conn.execute("UPDATE steps SET self_score = 3 WHERE episode_id = 'trust-summary-demo-c000-e0'")
    conn.close()
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_credit([DIVERGING_HISTORY], at_step=STEP_WITH_EVIDENCE)
        await settle(pilot)
        screen = app.screen
        await pilot.press("c")
        await settle(pilot)
        app.screen.query_one(Input).value = f"hf:{tiny_base}"
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen and not screen.busy
        assert any("analyzer" in what for *_, what in heard)  # each stage was shown as it came
        scored = [(done, total) for done, total, what in heard if total]
        assert scored and scored[-1][1] == len([w for *_, w in heard if "scoring step" in w])
        stored = episode_credit(Store(analysis_db), DIVERGING_HISTORY)
        assert stored is not None and stored.scorer == f"hf:{tiny_base}" and stored.advantage < 0
        aligned = [a for a in stored.actions if a.items]
        assert aligned and all(a.shift is not None for a in aligned)
        panel = screen.query_one(CreditPanel)
        assert panel.credit == stored
        assert panel.table.cursor_row == STEP_WITH_EVIDENCE  # still at the step the view was opened at
        for action in stored.actions:
            row = panel.table.full_row(f"s{action.step}")
            assert row[3].plain == fmt_metric(action.weight, 3)
            assert row[2].plain == weight_bar(action.weight, stored.eps_w, len(row[2].plain)).plain
        assert abs(sum(a.weight for a in stored.actions) / len(stored.actions) - 1) < 1e-9
        first = aligned[0]
        panel.table.move_cursor(row=[a.step for a in stored.actions].index(first.step))
        await pilot.pause()
        lines = detail_lines(screen)
        assert first.items[0].requirement in lines[0]
        ev_episode, ev_step = first.items[0].evidence[0]
        assert any(f"{ev_episode} step {ev_step}" in line for line in lines)
