"""A self-score outside what one step of its game can pay is marked where scores are shown: Play (replay
and live: the steps table, the agent panel, the score strip), Compare (both sides) and Report, with what
the mark means beside it. The checks read what is drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.engine.glossary import OUT_OF_RANGE_MARK
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.agent_panel import AgentPanel
from s3gym_tui.widgets.score_strip import ScoreStrip
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.table import DataTable
from tests.engine.helpers import hand_run
from tests.ui.settle import settle
from tests.ui.test_play import open_play, trust
from tests.ui.test_report import open_report, rows

NOTE = "outside what one step of trust can pay: -1..3"
SEED = 2
ACTIONS = ("collaborate", "cheat", "collaborate", "collaborate", "cheat")
SCORES = (20.1, 3.0, -7.0, None, 2.0)  # out, in (the top), out (below -1), missing (never out), in
CLEAN = (2.0, 3.0, -1.0, None, 0.0)  # every one in range
OUTSIDE = [True, False, True, False, False]


def _steps(episode_id: str, scores) -> list[Step]:
    env = games.make("trust", "explore")
    env.reset(SEED)
    steps = []
    for i, (action, score) in enumerate(zip(ACTIONS, scores)):
        observation = env.observation()
        result = env.step(action)
        said = "" if score is None else f", Score: {score:g}"
        steps.append(Step(episode_id=episode_id, index=i, observation=observation, prompt="[]",
                          reply=f"Answer: {action}{said}", action=action, self_score=score, reward=result.reward,
                          feedback=result.feedback, valid=result.valid, terminated=result.terminated,
                          truncated=result.truncated))
    return steps


@pytest.fixture
def marked_db(tmp_path) -> Path:
    """Two stored Trust episodes: one with self-scores out of range, one without."""
    path = tmp_path / "marked.db"
    with Store(path) as store:
        for episode_id, scores in (("overclaims", SCORES), ("clean", CLEAN)):
            steps = _steps(episode_id, scores)
            store.episodes.add_episode(Episode(id=episode_id, run_id=None, game="trust", mode="explore", phase="explore",
                                               seed=SEED, index=0, model="m/x", pathway="none"), steps)
            store.episodes.finish_episode(episode_id, sum(s.reward for s in steps))
    return path


def app_for(path: Path) -> S3GymApp:
    return S3GymApp(db_path=path, settings=Settings(default_model="scripted/trust", human_name="tester"))


def drawn(strip) -> list[str]:
    return [seg.text.strip() for seg in strip if seg.text.strip()]


def agent_line(screen) -> str:
    return str(screen.query_one(AgentPanel).query_one("#agent-action").full)


@pytest.mark.parametrize("size", [(80, 40), (120, 40), (200, 50)])
async def test_play_replay_marks_the_self_scores_that_cannot_be_right(marked_db, size):
    app = app_for(marked_db)
    async with app.run_test(size=size) as pilot:
        app.open_episode("overclaims")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlayScreen)
        table = screen.query_one(StepsTable)
        for i, (score, outside) in enumerate(zip(SCORES, OUTSIDE)):
            s_cell = drawn(table.render_line(i + 2))[1]  # line 0 the header, line 1 the start row
            plain = "?" if score is None else f"{score:g}"
            assert s_cell == (plain + OUT_OF_RANGE_MARK if outside else plain), f"step {i} at {size}"
            assert table.cell_text(i + 1, "s").plain == s_cell
        assert f"{OUT_OF_RANGE_MARK} s outside -1..3" in str(table.border_subtitle)
        await pilot.press("right")  # step 0: 20.1
        await settle(pilot)
        assert f"self-score 20.1{OUT_OF_RANGE_MARK}" in agent_line(screen) and NOTE in agent_line(screen)
        await pilot.press("right")  # step 1: 3, the most a round pays
        await settle(pilot)
        assert "self-score 3 " in agent_line(screen) and NOTE not in agent_line(screen)
        strip = screen.query_one(ScoreStrip)._build(400)  # the strip's figures, at a width that holds them all
        assert "n=4 · 1 without s · 2 s outside -1..3" in str(strip)


async def test_an_episode_without_such_scores_shows_no_mark(marked_db):
    app = app_for(marked_db)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_episode("clean")
        await settle(pilot)
        table = app.screen.query_one(StepsTable)
        cells = [drawn(table.render_line(i + 2))[1] for i in range(len(CLEAN))]
        assert cells == ["2", "3", "-1", "?", "0"]
        assert OUT_OF_RANGE_MARK not in str(table.border_subtitle)
        assert "outside" not in str(app.screen.query_one(ScoreStrip)._build(400))


async def test_live_play_marks_a_step_and_a_proposal_as_they_come(marked_db, monkeypatch):
    """The scripted player made to state 20.1 (the embedded model's habit): each stored step is marked
    in the table as it arrives, and a proposal waiting for the person already carries the note."""
    from s3gym_tui.providers import scripted

    monkeypatch.setattr(scripted, "act_reply", lambda move: f"Answer: {move.action}, Score: 20.1")
    app = app_for(marked_db)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n", "n")
        await settle(pilot)
        table = screen.query_one(StepsTable)
        assert len(screen.steps) == 2
        assert [drawn(table.render_line(i + 2))[1] for i in range(2)] == ["20.1" + OUT_OF_RANGE_MARK] * 2
        assert f"{OUT_OF_RANGE_MARK} s outside -1..3" in str(table.border_subtitle)
        assert NOTE in agent_line(screen)
        await pilot.press("p", "n")  # propose, then wait for the person
        await settle(pilot)
        assert screen.proposal is not None and "proposal" in agent_line(screen)
        assert f"self-score 20.1{OUT_OF_RANGE_MARK}" in agent_line(screen) and NOTE in agent_line(screen)


async def test_compare_marks_both_sides(marked_db):
    app = app_for(marked_db)
    async with app.run_test(size=(160, 50)) as pilot:
        app.open_compare("clean", "overclaims")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        table = screen.query_one("#cmp-table", DataTable)
        for i, (clean, score, outside) in enumerate(zip(CLEAN, SCORES, OUTSIDE)):
            cells = [str(c) for c in table.get_row_at(i)]
            a = "?" if clean is None else f"{clean:g}"
            b = "?" if score is None else f"{score:g}"
            assert cells[2] == a and cells[6] == (b + OUT_OF_RANGE_MARK if outside else b), f"row {i}"
            line = "".join(seg.text for seg in table.render_line(i + 1))  # as drawn: the mark beside s
            assert f" {cells[6]} " in line, f"row {i}: {line!r}"
        assert f"{OUT_OF_RANGE_MARK} s outside -1..3" in str(table.border_subtitle)
        side_b = str(screen.query_one("#cmp-b").query_one(".side-step").content)
        assert f"self 20.1{OUT_OF_RANGE_MARK}" in side_b and NOTE in side_b
        side_a = str(screen.query_one("#cmp-a").query_one(".side-step").content)
        assert OUT_OF_RANGE_MARK not in side_a and "outside" not in side_a
        await pilot.press("n")  # step 2: B states 3, in range
        await settle(pilot)
        assert "outside" not in str(screen.query_one("#cmp-b").query_one(".side-step").content)


async def test_report_counts_them_per_run_and_phase_and_names_the_range(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        run = hand_run(store, "trust-overclaims", [[(20.1, 2), (2, 2), (None, 0)]],
                       {0: [[(4, 3), (-1, -1), (9, 0)]], 1: [[]]}, {0: [1.0], 1: [2.0]})
    app = app_for(path)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_report(app, pilot, [run.id])
        judging = rows(screen, "#report-judging-table")
        assert judging[f"{run.id}:explore"][-3:-1] == ["1", "50.0%"]  # 1 of 2 self-scored steps
        assert judging[f"{run.id}:eval"][-3:-1] == ["2", "66.7%"]
        table = screen.query_one("#report-judging-table", DataTable)
        assert "out of range" in [str(c.label) for c in table.columns.values()]
        scale = str(screen.query_one("#report-scale").content)
        assert "trust: -1..3" in scale and f"marked {OUT_OF_RANGE_MARK}" in scale


def test_a_row_of_an_unknown_game_is_shown_unmarked():
    from s3gym_tui.widgets.verdicts import outside, range_note

    assert outside("trust", "eval", 20.1) and not outside("go", "eval", 20.1) and not outside(None, None, 20.1)
    assert range_note("go", "explore", 20.1) is None and range_note("trust", "eval", 20.1) == NOTE


async def test_protocol_marks_the_last_steps_self_score(tmp_path):
    path = tmp_path / "p.db"
    with Store(path) as store:  # whichever episode the screen shows, its last step states 20.1
        run = hand_run(store, "trust-protocol", [[(2, 2), (20.1, 2)]], {0: [[(2, 2), (20.1, 2)]]}, {0: [4.0]},
                       explore_episodes=1)
    app = app_for(path)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        await settle(pilot)
        shown = str(app.screen.query_one("#proto-step").content)
        assert f"Self-score 20.1{OUT_OF_RANGE_MARK}" in shown and NOTE in shown
