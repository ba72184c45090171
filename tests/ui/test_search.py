"""The Search screen as a person uses it: `/` from any screen, words and filters typed, results grouped
by episode with the words highlighted (hostile text gated), Enter opens the step in replay, `c`
compares, `m` marks (then the mark shows in replay, in Compare and in the next search)."""

from __future__ import annotations

from rich.console import Console

from s3gym_tui.app import S3GymApp
from s3gym_tui.highlight import MATCH_STYLE
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.search import SearchScreen
from s3gym_tui.store import Store
from tests.ui.settle import settle


def plain(renderable, width: int = 160) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


async def search_for(pilot, app, line: str) -> SearchScreen:
    await pilot.press("slash")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, SearchScreen)
    box = screen.query_one("#search-input")
    box.value = line
    await pilot.press("enter")
    for _ in range(100):
        await pilot.pause(0.05)
        if not screen.busy:
            break
    return screen


async def test_slash_opens_search_and_the_results_hold_the_filters(demo_db, settings):
    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await search_for(pilot, app, "opponent cheat game:trust verdict:over phase:eval")
        assert screen.hits, plain(screen.query_one("#search-status").render())
        with Store(path, read_only=True) as store:
            for hit in screen.hits:
                episode = store.episodes.get_episode(hit.episode_id)
                step = store.episodes.steps(episode.id)[hit.step_index]
                assert episode.game == "trust" and episode.phase == "eval"
                assert step.self_score is not None and step.self_score > 0 >= step.reward
        # grouped by episode: a header (not selectable) before each episode's hits
        results = screen.query_one("#search-results")
        headers = [o for o in results._options if o.disabled]
        assert len(headers) == len({h.episode_id for h in screen.hits})
        # the matching words are highlighted in the lines shown
        shown = results.get_option_at_index(1).prompt.text
        styled = {shown.plain[s.start:s.end].lower() for s in shown.spans if s.style == MATCH_STYLE}
        assert styled & {"opponent", "cheat"}


async def test_enter_opens_the_step_in_replay_and_c_compares(demo_db, settings):
    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await search_for(pilot, app, "cheat pathway:summary phase:eval")
        hit = screen.hits[0]
        await pilot.press("down", "enter")
        await pilot.pause(0.3)
        play = app.screen
        assert isinstance(play, PlayScreen) and play.episode.id == hit.episode_id
        assert play.position == hit.step_index + 1  # the board after that step, its reply and feedback
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert app.screen is screen
        await pilot.press("c")
        await pilot.pause(0.3)
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert hit.episode_id in compare.episode_ids
        other = [e for e in compare.episode_ids if e != hit.episode_id][0]
        with Store(path, read_only=True) as store:  # its History/Summary pair: same game, seed and x
            a, b = store.episodes.get_episode(hit.episode_id), store.episodes.get_episode(other)
            assert (a.game, a.seed, a.checkpoint) == (b.game, b.seed, b.checkpoint) and a.pathway != b.pathway


async def test_m_marks_a_result_and_the_mark_is_shown_and_found(demo_db, settings):
    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await search_for(pilot, app, "cheat game:trust")
        hit = screen.hits[0]
        await pilot.press("down", "m")
        await pilot.pause(0.2)
        app.screen.query_one("#annotate-note").value = "walked into the grudge"
        app.screen.query_one("#annotate-correction").value = "collaborate"
        await pilot.press("enter")
        for _ in range(40):
            await pilot.pause(0.05)
            if not screen.busy and app.screen is screen:
                break
        with Store(path, read_only=True) as store:
            (mark,) = store.annotations.list()
        assert (mark.target, mark.label, mark.author, mark.correction) == (hit.target, "mistake", "human:tester",
                                                                           "collaborate")
        screen = await search_for(pilot, app, "grudge")
        assert [h.target for h in screen.hits] == [hit.target] and screen.hits[0].labels == ("mistake",)
        await pilot.press("down", "enter")
        await pilot.pause(0.3)
        play = app.screen
        assert isinstance(play, PlayScreen)
        assert "mistake" in plain(play.query_one("#agent-feedback").render())


async def test_hostile_text_is_gated_in_the_results(demo_db, settings):
    path, ids = demo_db
    with Store(path) as store:
        episode = store.episodes.list(ids["trust-summary"])[0]
        store.annotations.add_annotation("episode", "insight", author="human:x", episode_id=episode.id,
                                         note="zebra \x1b]52;c;cm0gLXJmIH4=\x07 \u202etxet\u202c \x9b2J")
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = await search_for(pilot, app, "zebra")
        (hit,) = screen.hits
        text = screen.query_one("#search-results").get_option_at_index(1).prompt.text.plain
        assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
        assert "␛" in text and "\\u202e" in text


async def test_marks_on_summaries_and_in_the_report(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_summaries(run_id)
        await settle(pilot)
        await pilot.press("l")
        await pilot.pause(0.2)
        app.screen.query_one("#annotate-note").value = "names the grudge"
        await pilot.press("enter")
        await settle(pilot)
        with Store(path, read_only=True) as store:
            (mark,) = store.annotations.list()
        assert mark.kind == "summary" and mark.label == "mistake"
        assert "names the grudge" in plain(app.screen.query_one("#sum-detail").render())
        await pilot.press("escape")
        await settle(pilot)
        app.open_report([run_id])
        await settle(pilot)
        assert "marked: mistake 1" in plain(app.screen.query_one("#report-status").render())
