"""A slow model on Play (issue 36): a step's stored faults (`timeout: …; timeout: …`, the retries
its call made) stay on screen beside a long chess action, and while a call runs the status bar says
when a retry happened and why."""

from __future__ import annotations

import json

import s3gym_games as games
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import ModelSettings, Settings
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.agent_panel import AgentPanel
from tests.fake_openai import FakeOpenAI
from tests.ui.settle import settle, until

FAULT = "timeout: no progress for 120 s; timeout: no progress for 120 s"
EPISODE = "chess-slow"


def chess_db(path) -> None:
    """A stored chess episode of two reference-policy steps; the second one's call was retried twice."""
    env = games.make("chess", "explore")
    env.reset(0)
    policy = games.reference_policy("chess")
    steps = []
    for i in range(2):
        observation = env.observation()
        move = policy.act(env.view())
        result = env.step(move.action)
        steps.append(Step(episode_id=EPISODE, index=i, observation=observation,
                          prompt=json.dumps([{"role": "user", "content": observation}]),
                          reply=f"Answer: {move.action}, Score: 0", action=move.action, self_score=0.0,
                          reward=result.reward, feedback=result.feedback, valid=result.valid,
                          terminated=result.terminated, truncated=result.truncated,
                          fault=FAULT if i == 1 else None, tokens_in=7912, tokens_out=75, latency_ms=301_000.0))
    with Store(path) as store:
        store.episodes.add_episode(Episode(id=EPISODE, run_id=None, game="chess", mode="explore", phase="explore", seed=0,
                                           index=0, model="local/smollm2-135m", pathway="none"), steps)


def screen_text(screen) -> str:
    return "\n".join(strip.text for strip in screen._compositor.render_strips())


async def test_a_stored_timeout_fault_is_visible_beside_a_long_chess_action(tmp_path):
    chess_db(tmp_path / "slow.db")
    app = S3GymApp(db_path=tmp_path / "slow.db", settings=Settings(default_model="scripted/trust",
                                                                    human_name="tester"))
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_episode(EPISODE, at_step=1)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlayScreen) and screen.query_one(AgentPanel).shown.title == "step 1"
        text = " ".join(screen_text(screen).split())
        assert "more line" in text  # the long action is clamped ...
        assert "fault: timeout: no progress for 120 s;" in text  # ... and the fault is not behind it
        await pilot.press("left")
        await settle(pilot)
        assert "fault:" not in screen_text(screen)  # step 0 had none: the line is gone


async def test_the_status_bar_says_when_a_retry_happened_and_why(tmp_path):
    """The first request outlasts the call's timeout (the server says nothing for 3 s): the call is
    retried, and while the retry runs the status bar says so."""
    server = FakeOpenAI(reply="Answer: collaborate, Score: 1").start()
    server.behave(times=1, delay_s=3.0)
    server.behave(chunk_delay_s=0.6)  # the retry answers slowly, a word at a time
    try:
        settings = Settings(default_model="scripted/trust", human_name="tester").with_model_settings(
            "hosted_vllm/fake", ModelSettings(api_base=server.base_url, timeout_s=1.0))
        app = S3GymApp(db_path=tmp_path / "retry.db", settings=settings)
        async with app.run_test(size=(160, 40)) as pilot:
            app.open_play(game="trust", mode="explore", seed=0, model="hosted_vllm/fake")
            play = await until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen)
            await pilot.pause()
            line = lambda: str(play.query_one("#status-line").content)  # noqa: E731
            await pilot.press("n")
            await until(pilot, lambda: "retry 1 after timeout" in line(), what="the retry said")
            await until(pilot, lambda: len(play.steps) == 1, what="the step")
            assert play.steps[0].fault and play.steps[0].fault.startswith("timeout")
    finally:
        server.stop()
