"""Builders for the training tests: hand-made Trust runs whose steps carry chosen self-scores and
rewards, with prompts assembled exactly as the engine assembles them."""

from __future__ import annotations

import itertools
from typing import Optional, Sequence

import s3gym_games as games
from s3gym_tui.engine.experience import turns_from_steps
from s3gym_games.prompt import build_messages, messages_json
from s3gym_tui.models import EVAL_SEED_BASE, Episode, Run, RunConfig, Step
from s3gym_tui.store import Store

_ids = itertools.count()

# (action, self-score or None, reward-or-None) per step; a None reward keeps the game's real one
StepSpec = tuple[str, Optional[float], Optional[float]]


def trust_run(store: Store, model: str = "scripted/trust") -> Run:
    return store.runs.create_run(RunConfig(model=model, game="trust", pathway="none", explore_episodes=3,
                                           eval_every=3, eval_episodes=1))


def add_trust_episode(store: Store, run: Run, specs: Sequence[StepSpec], *, phase: str = "explore",
                      index: int = 0, seed: Optional[int] = None, actors: Optional[Sequence[str]] = None,
                      no_prompt: Sequence[int] = ()) -> Episode:
    """Play `specs` in a real Trust game (so replays and reference corrections see real states) and
    store the steps with the given self-scores and (optionally overridden) rewards."""
    if seed is None:
        seed = EVAL_SEED_BASE + index if phase == "eval" else index
    episode = Episode(id=f"{run.id}-hand{next(_ids)}", run_id=run.id, game="trust", mode=phase, phase=phase,
                      seed=seed, index=index, checkpoint=0 if phase == "eval" else None, model=run.config.model,
                      pathway="none")
    store.episodes.add_episode(episode)
    game = games.make("trust", phase)
    game.reset(seed)
    steps: list[Step] = []
    feedback = ""
    for i, (action, score, reward) in enumerate(specs):
        messages = build_messages(game, None, turns_from_steps(steps), feedback)
        observation = game.observation()
        result = game.step(action)
        actor = actors[i] if actors else "model"
        step = Step(episode_id=episode.id, index=i, observation=observation,
                    prompt="" if i in no_prompt else messages_json(messages),
                    reply=f"Thinking.\nAnswer: {action}, Score: {'?' if score is None else f'{score:g}'}",
                    action=action, self_score=score, reward=result.reward if reward is None else reward,
                    feedback=result.feedback, valid=result.valid, terminated=result.terminated,
                    truncated=result.truncated, actor=actor)
        store.episodes.add_step(step)
        steps.append(step)
        feedback = result.feedback
    store.episodes.finish_episode(episode.id, game.score())
    return store.episodes.get_episode(episode.id)
