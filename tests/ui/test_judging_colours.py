"""Judging is visible: s and r drawn in their step's verdict colour (agree, over, under, no self-score)
with the verdict's mark beside them, in Play (replay) and Compare, in both themes, at every width.

The checks read what is drawn (the rendered lines' segments and text), not the cells' intended
styles: the cells had the right styles while every s and r was drawn in the row's plain grey."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

import s3gym_games as games
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.engine.glossary import VERDICT_LABELS, VERDICT_MARKS
from s3gym_tui.engine.judging import verdict
from s3gym_games.prompt import format_score
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.table import DataTable
from tests.ui.settle import settle

FIXED_TIME = "2026-01-02T03:04:05.000+00:00"
SEED = 2  # Trust, explore: rewards -1, 3, 2, -1, 0, -1, 2 for these actions
ACTIONS = ("collaborate", "cheat", "collaborate", "collaborate", "cheat", "collaborate", "collaborate")
SCORES = (1.5, 3.0, 0.0, -1.0, None, 2.0, -0.5)  # over, agree, under, agree, missing, over, under
OTHER_SCORES = (-1.0, 0.0, 2.0, None, 1.0, -1.0, 2.0)  # the second episode: every verdict differs
# (all inside what a round pays, -1..3: an out-of-range mark is test_self_score_marks.py's subject)
EPISODES = ("judged-a", "judged-b")
THEME_VARIABLE = {"agree": "text-success", "over": "text-error", "under": "text-warning"}


def judged_steps(episode_id: str, scores) -> list[Step]:
    env = games.make("trust", "explore")
    env.reset(SEED)
    steps = []
    for i, (action, score) in enumerate(zip(ACTIONS, scores)):
        observation = env.observation()
        result = env.step(action)
        said = "" if score is None else f", Score: {score:g}"
        steps.append(Step(episode_id=episode_id, index=i, observation=observation,
                          prompt='[{"role": "user", "content": "Play Trust Evolution."}]',
                          reply=f"Answer: {action}{said}", action=action, self_score=score,
                          reward=result.reward, feedback=result.feedback, valid=result.valid,
                          terminated=result.terminated, truncated=result.truncated, created_at=FIXED_TIME))
    return steps


@pytest.fixture
def judged_db(tmp_path) -> Path:
    """Two stored Trust episodes (no run) whose steps cover every verdict, at fixed times."""
    path = tmp_path / "judged.db"
    with Store(path) as store:
        for episode_id, scores in zip(EPISODES, (SCORES, OTHER_SCORES)):
            steps = judged_steps(episode_id, scores)
            store.episodes.add_episode(Episode(id=episode_id, run_id=None, game="trust", mode="explore",
                                               phase="explore", seed=SEED, index=0, model="scripted/trust",
                                               pathway="none", started_at=FIXED_TIME), steps)
            store.episodes.finish_episode(episode_id, sum(s.reward for s in steps))
        store.db.execute("UPDATE episodes SET finished_at = ?", (FIXED_TIME,))
        store.db.conn.commit()
    return path


def expected_rows(scores=SCORES) -> list[tuple[str, str, str]]:
    """(verdict, s as drawn, r as drawn) per step."""
    return [(verdict(s.self_score, s.reward), format_score(s.self_score), format_score(s.reward))
            for s in judged_steps("x", scores)]


def app_for(path: Path, theme: str) -> S3GymApp:
    return S3GymApp(db_path=path, settings=Settings(default_model="scripted/trust", theme=theme,
                                                    human_name="tester"))


def words(strip) -> list[tuple[str, object]]:
    """The non-blank segments of a rendered line: (text, style)."""
    return [(seg.text.strip(), seg.style) for seg in strip if seg.text.strip()]


def colour_of(style) -> Optional[str]:
    return style.color.triplet.hex.lower() if style is not None and style.color is not None else None


def assert_drawn_in_verdict_colour(app, style, kind: str, what: str) -> None:
    if kind == "missing":
        assert style.dim, f"{what}: a step without a self-score is drawn dim, got {style}"
        return
    expected = app.theme_variables[THEME_VARIABLE[kind]].lower()
    assert colour_of(style) == expected, f"{what} ({kind}) drawn in {colour_of(style)}, expected {expected}"


async def open_replay(pilot, episode_id: str = EPISODES[0]) -> StepsTable:
    pilot.app.open_episode(episode_id)
    await settle(pilot)
    assert isinstance(pilot.app.screen, PlayScreen)
    return pilot.app.screen.query_one(StepsTable)


# ----- Play: the steps table --------------------------------------------------------------------
@pytest.mark.parametrize("theme", ["dark", "light"])
async def test_steps_table_draws_s_and_r_in_the_verdict_colour_with_its_mark(judged_db, theme):
    app = app_for(judged_db, theme)
    async with app.run_test(size=(200, 50)) as pilot:  # wide: the judged column is there too
        table = await open_replay(pilot)
        assert table.cursor_row == 0  # the start row: every step row is drawn as it is
        for toggle in (False, True):  # then the other theme, switched with ctrl+t
            if toggle:
                before = dict(app.theme_variables)
                await pilot.press("ctrl+t")
                await settle(pilot)
                assert app.theme_variables["text-success"] != before["text-success"]
            for i, (kind, s, r) in enumerate(expected_rows()):
                drawn = words(table.render_line(i + 2))  # line 0 the header, line 1 the start row
                what = f"step {i} ({app.theme})"
                assert [text for text, _ in drawn[:5]] == [str(i), s, r, VERDICT_MARKS[kind],
                                                          VERDICT_LABELS[kind]], what
                for (text, style), part in zip(drawn[1:5], ("s", "r", "mark", "judged")):
                    assert_drawn_in_verdict_colour(app, style, kind, f"{what} {part} {text!r}")


async def test_the_cursor_row_keeps_its_verdict_as_a_coloured_mark(judged_db):
    app = app_for(judged_db, "light")  # the verdict colours are darkest on the light cursor
    async with app.run_test(size=(120, 40)) as pilot:
        table = await open_replay(pilot)
        table.focus()
        for i, (kind, s, r) in enumerate(expected_rows()):
            await pilot.press("down")
            await pilot.pause()
            assert table.cursor_row == i + 1
            drawn = words(table.render_line(i + 2))
            cursor = table.get_component_rich_style("steps-table--cursor")
            (s_text, s_style), (r_text, r_style), (mark, mark_style) = drawn[1:4]
            assert (s_text, r_text, mark) == (s, r, VERDICT_MARKS[kind]), f"step {i}"
            for style in (s_style, r_style):  # legible: the cursor's own colours
                assert (style.color, style.bgcolor) == (cursor.color, cursor.bgcolor), f"step {i}"
            if kind == "missing":
                assert mark_style.dim
            else:  # a chip: the cursor's background on the verdict's colour
                expected = app.theme_variables[THEME_VARIABLE[kind]].lower()
                assert mark_style.bgcolor.triplet.hex.lower() == expected, f"step {i}"
                assert mark_style.color == cursor.bgcolor


async def test_the_mark_keeps_the_verdict_when_the_judged_column_is_dropped(judged_db, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # no colour at all: the marks alone say it
    app = app_for(judged_db, "dark")
    async with app.run_test(size=(80, 40)) as pilot:  # narrow and tall: the steps beside the agent, 32 wide
        assert app.no_color
        table = await open_replay(pilot)
        header = [text for text, _ in words(table.render_line(0))]
        assert "judged" not in header  # too narrow for the words
        for i, (kind, s, r) in enumerate(expected_rows()):
            drawn = [text for text, _ in words(table.render_line(i + 2))]
            assert drawn[:4] == [str(i), s, r, VERDICT_MARKS[kind]], f"step {i}"
        assert len(set(VERDICT_MARKS.values())) == len(VERDICT_MARKS)  # one mark, one verdict


# ----- Compare: the aligned table and the two sides ---------------------------------------------
@pytest.mark.parametrize("theme", ["dark", "light"])
async def test_compare_draws_both_sides_in_their_verdict_colours(judged_db, theme):
    app = app_for(judged_db, theme)
    async with app.run_test(size=(160, 50)) as pilot:
        app.open_compare(*EPISODES)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        table = screen.query_one("#cmp-table", DataTable)
        for i, (a, b) in enumerate(zip(expected_rows(SCORES), expected_rows(OTHER_SCORES))):
            drawn = words(table.render_line(i + 1))  # line 0 the header
            texts = [text for text, _ in drawn]
            assert texts[:9] == [str(i + 1), ACTIONS[i], a[1], a[2], VERDICT_MARKS[a[0]],
                                 ACTIONS[i], b[1], b[2], VERDICT_MARKS[b[0]]], f"row {i}"
            if i == table.cursor_row:
                continue  # drawn in the cursor's colours (legible); the marks say it
            for (text, style), kind in zip(drawn[2:5] + drawn[6:9], (a[0],) * 3 + (b[0],) * 3):
                assert_drawn_in_verdict_colour(app, style, kind, f"row {i} {text!r} ({theme})")
        # the side panels say it too: the step's s and r coloured, the mark and the words
        side = screen.query_one("#cmp-a")
        step_text = side.query_one(".side-step").content
        kind = expected_rows()[0][0]
        assert f"{VERDICT_MARKS[kind]} over-confident" in str(step_text)
        spans = {str(step_text)[span.start:span.end]: span.style for span in step_text.spans}
        assert_drawn_in_verdict_colour(app, app.console.get_style(spans["1.5"]), kind, "side A s")


# ----- snapshots: the colours and marks as a person sees them -------------------------------------
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_play_replay_with_every_verdict_snapshot(snap_compare, judged_db, theme):
    """Agree, over, under and no-self-score rows, the cursor on an over-confident step."""
    async def run_before(pilot) -> None:
        table = await open_replay(pilot)
        table.focus()
        for _ in range(6):  # the cursor to step 5 (over-confident)
            await pilot.press("down")
        await settle(pilot)

    assert snap_compare(app_for(judged_db, theme), terminal_size=(120, 40), run_before=run_before)
