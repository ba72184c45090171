"""Episode-level GRPO rollouts in the store: every episode the policy played for a group becomes an
exploration episode (explore phase, its exploration seed; the store refuses an evaluation seed) of the
training's own run `grpo-rollouts-<training>`, with its steps (prompt as sent, reply, action, reward),
so the app replays them and compares the G siblings of one seed. Torch-free."""

from __future__ import annotations

from typing import Any, Optional

from s3gym_games.prompt import messages_json
from s3gym_tui.models import Episode, Run, RunConfig, Step
from s3gym_tui.store import TrainingSource
from s3gym_tui.store.errors import StoreError

RUN_PREFIX = "grpo-rollouts-"


def rollout_run_id(training_id: str) -> str:
    return f"{RUN_PREFIX}{training_id}"


class RolloutStore:
    """Stores rollouts of one training as they end (created on the first one; resumes numbering)."""

    def __init__(self, store: Any, training_id: str, game: str, seeds: list[int], step_cap: Optional[int],
                 temperature: float) -> None:
        self.store, self.training_id, self.game = store, training_id, game
        self.seeds, self.step_cap, self.temperature = seeds, step_cap, temperature
        self.run: Optional[Run] = None
        self.index = 0

    def _ensure_run(self) -> Run:
        if self.run is None:
            run_id = rollout_run_id(self.training_id)
            try:
                self.run = self.store.runs.get_run(run_id)
                self.index = len(self.store.episodes.list(run_id))
            except StoreError:  # not there yet
                config = RunConfig(model=f"trained/{self.training_id}/policy", game=self.game, pathway="none",
                                   explore_episodes=max(1, len(self.seeds)), eval_episodes=0,
                                   step_cap=min(64, self.step_cap or 64), temperature=min(2.0, self.temperature))
                self.run = self.store.runs.create_run(config, run_id=run_id,
                                                      note=f"GRPO rollout episodes of training {self.training_id}")
                self.store.runs.set_run_status(run_id, "running")
        return self.run

    def __call__(self, rollout: Any) -> Episode:
        run = self._ensure_run()
        episode = Episode(id=f"{run.id}-e{self.index}", run_id=run.id, game=self.game, mode="explore",
                          phase="explore", seed=rollout.seed, index=self.index, model=run.config.model,
                          pathway="none")
        self.index += 1
        steps = [Step(episode_id=episode.id, index=s.index, observation=s.observation,
                      prompt=messages_json(s.prompt), reply=s.reply, action=s.action, self_score=s.self_score,
                      reward=s.reward, feedback=s.feedback, valid=s.valid, terminated=s.terminated,
                      truncated=s.truncated, tokens_out=s.tokens,
                      fault=None if s.parsed else "no parsable answer") for s in rollout.steps]
        self.store.episodes.add_episode(episode, steps)
        self.store.episodes.finish_episode(episode.id, rollout.score)
        self.store.trainings.add_training_sources(self.training_id, [TrainingSource(
            kind="rollout", game=self.game, seed=rollout.seed, mode="explore", n=len(steps), ref=episode.id)])
        return episode

    def close(self) -> None:
        if self.run is not None:
            self.store.runs.set_run_status(self.run.id, "finished")
