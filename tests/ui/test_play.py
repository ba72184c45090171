"""Play screen: every control drives the real engine and is stored correctly (scripted models)."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Input

from tests.ui.settle import settle
from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.runner import explore_episode_id
from s3gym_tui.screens.dialogs import ForkDialog, TextInputDialog
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.agent_panel import AgentPanel, format_prompt
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.status_bar import StatusBar
from s3gym_tui.engine.judging import verdict
from s3gym_tui.widgets.steps_table import StepsTable

HANG_PROVIDER = "hangtest"


# ----- helpers --------------------------------------------------------------------------------


async def open_play(pilot, **options) -> PlayScreen:
    pilot.app.open_play(**options)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, PlayScreen)
    return screen


async def fork_at(pilot, source: str, k: int) -> None:
    """Open a stored episode, step to position k and fork there: the fork dialog is clicked through."""
    pilot.app.open_episode(source)
    await pilot.pause()
    await pilot.press(*["right"] * k, "f")
    await pilot.pause()
    assert isinstance(pilot.app.screen, ForkDialog)
    await pilot.click("#fork")
    await pilot.pause()


def stored(db_path, episode_id):
    with Store(db_path) as store:
        return store.episodes.get_episode(episode_id), store.episodes.steps(episode_id)


def trust(**extra) -> dict:
    return dict(game="trust", mode="explore", seed=0, model="scripted/trust", **extra)


def install_hanging_model() -> str:
    """A litellm custom provider whose calls never return until cancelled (a model 'thinking')."""
    import litellm
    from litellm import CustomLLM

    from s3gym_tui.providers import register

    class Hang(CustomLLM):
        async def acompletion(self, *args, **kwargs):
            await asyncio.Event().wait()

        def completion(self, *args, **kwargs):  # pragma: no cover - the engine is async
            raise RuntimeError("sync call")

    register()
    kept = [e for e in litellm.custom_provider_map if e.get("provider") != HANG_PROVIDER]
    litellm.custom_provider_map = kept + [{"provider": HANG_PROVIDER, "custom_handler": Hang()}]
    litellm.utils.custom_llm_setup()
    return f"{HANG_PROVIDER}/x"


@pytest.fixture
def app(demo_db, settings):
    path, _ = demo_db
    return S3GymApp(db_path=path, settings=settings)


# ----- step / run / stop / restart -----------------------------------------------------------
async def test_step_once_stores_a_model_step_and_updates_the_screen(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        episode_id = screen.episode.id
        board_before = str(screen.query_one(BoardPanel).border_subtitle)
        await pilot.press("n")
        await settle(pilot)
        table = screen.query_one(StepsTable)
        assert table.step_count == 1
        assert screen.query_one(BoardPanel).border_subtitle != board_before
        agent = screen.query_one(AgentPanel)
        assert agent.shown is not None and agent.shown.title == "step 0"
        assert "Answer:" in agent.shown.reply
        await pilot.press("space")
        await settle(pilot)
        assert table.step_count == 2
        episode, steps = stored(demo_db[0], episode_id)
        assert [s.actor for s in steps] == ["model", "model"]
        assert all(s.prompt and s.reply for s in steps)
        assert episode.status == "running" and episode.n_steps == 2


async def test_queued_step_presses_run_one_after_another(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n", "n", "n")
        await settle(pilot)
        assert screen.query_one(StepsTable).step_count == 3
        episode_id = screen.episode.id
    assert len(stored(demo_db[0], episode_id)[1]) == 3


async def test_run_plays_to_the_end_and_shows_the_final_score(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("r")
        await settle(pilot)
        episode, steps = stored(demo_db[0], screen.episode.id)
        assert episode.status == "finished" and episode.score is not None
        assert len(steps) == 10  # Trust explore: 10 rounds
        assert screen.running is False
        status = str(screen.query_one("#status-line").render())
        assert f"final verifier score {episode.score:g}" in status
        assert "final score" in screen.query_one(BoardPanel).border_subtitle
        # the episode is over: stepping is refused, nothing more is stored
        await pilot.press("n")
        await settle(pilot)
        assert len(stored(demo_db[0], screen.episode.id)[1]) == 10


async def test_run_pause_stops_after_the_step_in_progress(app, demo_db, settings):
    """In propose-then-wait, run proposes; pause then accept stores that step and asks no more."""
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("p", "r")
        await settle(pilot)
        assert screen.running and screen.proposal is not None
        await pilot.press("a")  # accept: run goes on to the next proposal
        await settle(pilot)
        assert screen.proposal is not None and len(screen.steps) == 1
        await pilot.press("r")  # pause
        assert screen.running is False
        await pilot.press("a")
        await settle(pilot)
        assert screen.proposal is None and not screen.thinking
        episode, steps = stored(demo_db[0], screen.episode.id)
        assert len(steps) == 2 and episode.status == "running"


async def test_stop_finishes_the_episode_as_stopped(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        episode, steps = stored(demo_db[0], screen.episode.id)
        assert episode.status == "stopped" and len(steps) == 1 and episode.score is not None
        assert "stopped" in str(screen.query_one("#status-line").render())
        await pilot.press("n")
        await settle(pilot)
        assert len(stored(demo_db[0], screen.episode.id)[1]) == 1


async def test_restart_opens_a_new_episode_with_the_same_settings(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        first = screen.episode.id
        await pilot.press("n")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        second = screen.episode.id
        assert second != first
        assert screen.query_one(StepsTable).step_count == 0
        old, old_steps = stored(demo_db[0], first)
        new, new_steps = stored(demo_db[0], second)
        assert old.status == "stopped" and len(old_steps) == 1
        assert (new.game, new.mode, new.seed, new.model, new.pathway) == \
            ("trust", "explore", 0, "scripted/trust", "none")
        assert new.status == "running" and new_steps == []


# ----- take over, propose-then-wait ------------------------------------------------------------
async def test_take_over_stores_a_human_step(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("t")
        takeover = screen.query_one("#takeover", Input)
        assert takeover.display and takeover.has_focus
        await pilot.press(*"cheat", "enter")
        await settle(pilot)
        assert not takeover.display
        assert screen.query_one(StepsTable).step_count == 1
        episode_id = screen.episode.id
    _, steps = stored(demo_db[0], episode_id)
    assert len(steps) == 1
    step = steps[0]
    assert (step.actor, step.action, step.reply, step.proposed_action) == ("human", "cheat", "", None)
    assert step.valid


async def test_propose_then_wait_accept_stores_the_models_action(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        assert screen.propose_then_wait is False  # the setting's default
        await pilot.press("p")
        assert screen.propose_then_wait is True
        await pilot.press("n")
        await settle(pilot)
        assert screen.proposal is not None
        assert screen.query_one("#proposal").display
        assert "not executed" in screen.query_one(AgentPanel).shown.title
        assert stored(demo_db[0], screen.episode.id)[1] == []  # nothing stored before accepting
        proposed = screen.proposal.action
        await pilot.press("enter")
        await settle(pilot)
        assert screen.proposal is None and not screen.query_one("#proposal").display
        _, steps = stored(demo_db[0], screen.episode.id)
    assert [(s.actor, s.action, s.proposed_action) for s in steps] == [("model", proposed, None)]


async def test_propose_then_wait_edit_stores_a_human_edit_with_the_proposal(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("p", "n")
        await settle(pilot)
        proposed = screen.proposal.action
        replacement = "cheat" if proposed != "cheat" else "collaborate"
        await pilot.press("e")
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, TextInputDialog)
        field = dialog.query_one(Input)
        assert field.value == proposed  # prefilled with the proposal
        field.value = replacement
        await pilot.press("enter")
        await settle(pilot)
        assert pilot.app.screen is screen and screen.proposal is None
        _, steps = stored(demo_db[0], screen.episode.id)
    assert len(steps) == 1
    step = steps[0]
    assert (step.actor, step.action, step.proposed_action) == ("human-edit", replacement, proposed)
    assert step.reply  # the model's reply that was edited is kept


async def test_propose_then_wait_veto_discards_and_asks_again(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("p", "n")
        await settle(pilot)
        assert screen.proposal is not None
        await pilot.press("v")
        await settle(pilot)
        assert screen.proposal is None
        assert stored(demo_db[0], screen.episode.id)[1] == []
        await pilot.press("n")  # ask again
        await settle(pilot)
        assert screen.proposal is not None
        await pilot.press("v", "t", *"cheat", "enter")  # veto, then type an action yourself
        await settle(pilot)
        _, steps = stored(demo_db[0], screen.episode.id)
    assert [(s.actor, s.action, s.proposed_action) for s in steps] == [("human", "cheat", None)]


async def test_propose_then_wait_default_comes_from_settings(demo_db, settings):
    app = S3GymApp(db_path=demo_db[0], settings=settings.model_copy(update={"propose_then_wait": True}))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        assert screen.propose_then_wait is True
        await pilot.press("n")
        await settle(pilot)
        assert screen.proposal is not None and screen.steps == []


# ----- cancel, responsiveness, errors --------------------------------------------------------------
async def test_cancel_a_call_in_flight_stores_nothing_and_ui_stays_responsive(app, demo_db):
    model = install_hanging_model()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="trust", mode="explore", seed=0, model=model)
        await pilot.press("n")
        for _ in range(50):  # until the call is really in flight (litellm may still be importing)
            await pilot.pause()
            if screen.thinking:
                break
        assert screen.thinking
        spinner = screen.query_one("#spinner")
        bar = screen.query_one(StatusBar)
        if not spinner.visible:  # the spinner appears after a short delay (no flicker for fast models)
            assert bar.pending
            bar.reveal()
            await pilot.pause()
        assert spinner.visible and "is thinking" in str(screen.query_one("#status-line").render())
        await pilot.press("p")  # the UI reacts while the model thinks
        assert screen.propose_then_wait is True
        await pilot.press("c")
        await settle(pilot)
        assert not screen.thinking and not spinner.visible
        assert "is thinking" not in str(screen.query_one("#status-line").render())
        assert stored(demo_db[0], screen.episode.id)[1] == []
        # escape cancels too
        await pilot.press("n")
        await pilot.pause()
        assert screen.thinking
        await pilot.press("escape")
        await settle(pilot)
        assert not screen.thinking and pilot.app.screen is screen
        assert stored(demo_db[0], screen.episode.id)[1] == []


async def test_model_error_notifies_and_keeps_the_episode(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="trust", mode="explore", seed=0, model="nosuchprovider/x")
        await pilot.press("n")
        await settle(pilot)
        errors = [n for n in pilot.app._notifications if n.severity == "error"]
        assert errors and "nosuchprovider/x" in errors[-1].message
        assert not screen.thinking and pilot.app.screen is screen
        episode, steps = stored(demo_db[0], screen.episode.id)
        assert episode.status == "running" and steps == []
        # the episode is intact: a person can still play it
        await pilot.press("t", *"collaborate", "enter")
        await settle(pilot)
        assert [s.actor for s in stored(demo_db[0], screen.episode.id)[1]] == ["human"]


async def test_invalid_seed_passed_to_play_shows_a_message_and_stores_nothing(app, demo_db):
    with Store(demo_db[0]) as store:
        before = len(store.episodes.list())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="trust", mode="eval", seed=3, model="scripted/trust")
        assert screen.session is None and "seed 3" in (screen.error or "")
        assert any(n.severity == "error" for n in pilot.app._notifications)
        await pilot.press("n")
        await settle(pilot)
    with Store(demo_db[0]) as store:
        assert len(store.episodes.list()) == before


# ----- replay and fork ----------------------------------------------------------------------------
async def test_replay_navigation_of_a_stored_episode(app, demo_db):
    path, ids = demo_db
    source = explore_episode_id(ids["trust-history"], 2)
    _, steps = stored(path, source)
    async with app.run_test(size=(120, 40)) as pilot:
        pilot.app.open_episode(source)
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, PlayScreen) and screen.readonly
        table = screen.query_one(StepsTable)
        assert table.step_count == len(steps)
        assert screen.position == 0 and table.cursor_row == 0  # the start: no step yet
        assert "start" in screen.query_one(BoardPanel).border_subtitle
        assert screen.query_one(AgentPanel).shown is None
        await pilot.press("right", "right")  # after step 1: that step's board, action, feedback, prompt
        assert screen.position == 2 and table.cursor_row == 2
        agent = screen.query_one(AgentPanel)
        assert agent.shown.action == steps[1].action
        assert "after step 1" in screen.query_one(BoardPanel).border_subtitle
        assert steps[1].feedback in str(agent.query_one("#agent-feedback").render())
        assert "step 1" in str(agent.query_one("#agent-feedback").render())
        assert agent.shown.prompt  # fetched with store.prompts.step_prompt
        await pilot.press("left")
        assert screen.position == 1 and agent.shown.action == steps[0].action
        await pilot.press("end")
        assert screen.position == len(steps)
        assert "final" in screen.query_one(BoardPanel).border_subtitle
        await pilot.press("home")
        assert screen.position == 0
        await pilot.press("down", "down", "down")  # the table cursor moves the replay too
        await pilot.pause()
        assert screen.position == 3 and agent.shown.action == steps[2].action
        # read-only: stepping and taking over do nothing
        await pilot.press("n", "t")
        await settle(pilot)
        assert not screen.query("#takeover")  # a replay has no take-over box at all
        assert len(screen.steps) == len(steps) and screen.readonly
    assert len(stored(path, source)[1]) == len(steps)


async def test_fork_from_step_k_copies_the_prefix_and_continues(app, demo_db):
    path, ids = demo_db
    source = explore_episode_id(ids["trust-history"], 2)
    _, source_steps = stored(path, source)
    k = 3
    async with app.run_test(size=(120, 40)) as pilot:
        await fork_at(pilot, source, k)
        fork_screen = pilot.app.screen
        assert isinstance(fork_screen, PlayScreen) and not fork_screen.readonly
        fork_id = fork_screen.episode.id
        assert fork_screen.query_one(StepsTable).step_count == k
        assert fork_screen.position == k  # the view starts where the fork continues
        assert fork_screen.original is not None and len(fork_screen.original) == len(source_steps)
        await pilot.press("n")
        await settle(pilot)
        assert fork_screen.query_one(StepsTable).step_count == k + 1
    fork, steps = stored(path, fork_id)
    assert fork.fork_of == source and fork.fork_step == k
    assert fork.model == "scripted/trust" and fork.pathway == "history"
    assert len(steps) == k + 1
    for mine, theirs in zip(steps[:k], source_steps[:k]):
        assert (mine.observation, mine.action, mine.self_score, mine.reward) == \
               (theirs.observation, theirs.action, theirs.self_score, theirs.reward)
    assert steps[k].actor == "model" and steps[k].observation == source_steps[k].observation


async def test_fork_with_another_model_and_compare_key(app, demo_db, monkeypatch):
    path, ids = demo_db
    source = explore_episode_id(ids["trust-summary"], 1)
    calls = []
    monkeypatch.setattr(S3GymApp, "open_compare", lambda self, a, b: calls.append((a, b)))
    async with app.run_test(size=(120, 40)) as pilot:
        pilot.app.open_episode(source)
        await pilot.pause()
        await pilot.press("right", "f")
        await pilot.pause()
        dialog = pilot.app.screen
        dialog.query_one("#model-input", Input).value = "fault/trust"
        dialog.query_one("#fork-pathway").value = "none"
        await pilot.click("#fork")
        await pilot.pause()
        fork_screen = pilot.app.screen
        fork_id = fork_screen.episode.id
        await pilot.press("C")
        assert calls == [(source, fork_id)]
    fork, steps = stored(path, fork_id)
    assert (fork.model, fork.pathway, fork.fork_step, len(steps)) == ("fault/trust", "none", 1, 1)


# ----- what the agent saw --------------------------------------------------------------------------
async def test_history_prompt_marks_hint_block_and_cut(demo_db, settings):
    """A run whose history budget drops episodes: the prompt shows the Hint block and the cut marked."""
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig

    path, _ = demo_db
    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="history",
                                              explore_episodes=4, eval_every=4, eval_episodes=0,
                                              history_budget=500), run_id="tiny-budget")
        await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust(pathway="history", source_run_id="tiny-budget"))
        assert screen.episode.history_cut > 0
        await pilot.press("n")
        await settle(pilot)
        agent = screen.query_one(AgentPanel)
        assert agent.hint_marked and agent.cut_marked
        plain = agent.prompt_text.plain
        assert "Hint Messages:" in plain and "older episode(s) dropped" in plain
        title = str(agent.query_one("#prompt-box").title)
        assert "Hint Messages" in title and "history cut" in title
        assert "dropped" in str(agent.query_one("#agent-context").render())


def test_prompt_formatting_marks_only_what_is_there():
    plain_prompt = '[{"role": "user", "content": "Game rules:\\nplay"}]'
    text, hint, cut = format_prompt(plain_prompt)
    assert (hint, cut) == (False, False) and "Game rules" in text.plain
    marked = ('[{"role": "user", "content": "Hint Messages:\\n[2 older episode(s) dropped to fit the '
              'history budget]\\n--- ep ---\\n\\nGame rules:\\nplay"}]')
    text, hint, cut = format_prompt(marked)
    assert (hint, cut) == (True, True)
    styled = {text.plain[span.start:span.end] for span in text.spans if "reverse" in str(span.style)}
    assert "Hint Messages:" in styled
    assert "[2 older episode(s) dropped to fit the history budget]" in styled


@pytest.mark.parametrize("s, r, expected", [(1.0, 2.0, "agree"), (0.0, 0.0, "agree"), (-1.0, -1.0, "agree"),
                                            (2.0, 0.0, "over"), (0.0, 1.0, "under"), (None, 1.0, "missing")])
def test_verdict_colours_follow_the_judging_rule(s, r, expected):
    assert verdict(s, r) == expected


async def test_steps_table_colours_use_the_theme(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("t", *"cheat", "enter")  # human step, no self-score
        await pilot.press("n")
        await settle(pilot)
        table = screen.query_one(StepsTable)
        v = pilot.app.theme_variables
        human = table.cell_text(1, "verdict")  # row 0 is the start, row 1 step 0
        assert str(human) == "no s"  # a typed action carries no self-score
        cell = table.cell_text(2, "verdict")
        expected = {"agree": v["text-success"], "over": v["text-error"], "under": v["text-warning"]}
        assert str(cell) in expected
        assert expected[str(cell)].lower() in str(cell.style).lower()
        await pilot.press("ctrl+t")  # the colours follow the theme
        await pilot.pause()
        light = pilot.app.theme_variables
        cell = table.cell_text(2, "verdict")
        assert light["text-success"] != v["text-success"]
        assert {"agree": light["text-success"], "over": light["text-error"],
                "under": light["text-warning"]}[str(cell)].lower() in str(cell.style).lower()


# ----- conventions: palette, help, theme, small terminal --------------------------------------------
async def test_command_palette_runs_play_commands(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"take over")
        for _ in range(20):
            await pilot.pause()
        await pilot.press("enter")
        for _ in range(5):
            await pilot.pause()
        assert pilot.app.screen is screen
        assert screen.query_one("#takeover").display


async def test_help_and_theme_from_play(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await open_play(pilot, **trust())
        theme = pilot.app.theme
        await pilot.press("ctrl+t")
        assert pilot.app.theme != theme
        await pilot.press("question_mark")
        await pilot.pause()
        from s3gym_tui.screens.help import HelpScreen

        assert isinstance(pilot.app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, PlayScreen)


async def test_play_works_at_80x24(app, demo_db):
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n", "n")
        await settle(pilot)
        for selector in ("#board", "#steps", "#status-line"):
            region = screen.query_one(selector).region
            assert region.width > 10 and region.height >= 1, selector
            assert region.right <= 80 and region.bottom <= 24, selector
        assert screen.query_one(StepsTable).step_count == 2
        assert not screen.query_one("#agent").region  # one key away (i): tests/ui/test_sizes.py
        await pilot.press("p", "n")
        await settle(pilot)
        proposal = screen.query_one("#proposal")
        assert proposal.region.height == 1 and proposal.region.bottom <= 24 and proposal.region.width > 40
        assert "Model proposes" in proposal.text and "Accept" in proposal.text


async def test_leaving_an_unfinished_episode_records_it_as_stopped(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n")
        await settle(pilot)
        episode_id = screen.episode.id
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, PlayScreen)
    assert stored(demo_db[0], episode_id)[0].status == "stopped"


# ----- the embedded model ----------------------------------------------------------------------------
async def test_embedded_local_model_makes_real_steps(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="trust", mode="explore", seed=0, model="local/smollm2-135m")
        await pilot.press("n", "n")
        await settle(pilot)
        errors = [n.message for n in pilot.app._notifications if n.severity == "error"]
        assert not errors, errors
        assert screen.query_one(StepsTable).step_count == 2
        _, steps = stored(demo_db[0], screen.episode.id)
    assert len(steps) == 2
    assert all(s.actor == "model" and s.reply and s.tokens_out > 0 for s in steps)
