"""Gymnasium environments of the games, one id per game and mode (`s3gym/trust-eval-v0`): text in, text out.

Needs the `gym` extra. Importing this module registers the ids (every game of the registry, third-party
ones included); `gymnasium.make("s3gym_games.gym_env:s3gym/trust-eval-v0")` imports it on the way.

- `reset(seed=n)` seeds the environment, which draws the episode's game seed from its mode's range:
  eval mode serves evaluation seeds only, explore mode exploration seeds only (s3gym_games.seeds).
  `options={"game_seed": s}` plays one exact game seed, refused outside the mode's range.
- The observation is the game's observation text; the action is an action text (the reply contract's
  `<ACTION>`, see s3gym_games.reply.parse_reply to get it from a model's reply).
- The reward is the game's verifier reward for the step. `terminated`: the game ended by its rules;
  `truncated`: only a step cap stopped it (the game's, the harness's 64, or a `max_episode_steps` given to
  `gymnasium.make`). The final score is `info["score"]` on the last step: for six games it equals the
  sum of the rewards; chess's score is that sum divided by its max steps (Game.score_per_reward).
- `info` at reset holds the rules and the answer format (what build_messages puts in the prompt).
"""

from __future__ import annotations

import string
from typing import Any, Optional

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as error:  # the optional extra is missing: say which one
    raise ImportError("s3gym_games.gym_env needs gymnasium: pip install 's3gym-games[gym]' (or 's3gym[gym]')"
                      ) from error

import s3gym_games as games
from s3gym_games.reply import MAX_ACTION_CHARS
from s3gym_games.seeds import DRAWN_SEEDS, require_seed_of

VERSION = 0
MAX_OBSERVATION_CHARS = 16_384  # the longest observation of the seven is chess's, under 6,000 characters
CHARSET = frozenset(string.printable)  # observations are plain ASCII; actions are read as text


def env_id(game: str, mode: str) -> str:
    """The registered id of a game in a mode, e.g. `s3gym/trust-eval-v0`."""
    return f"s3gym/{games.canonical(game)}-{mode}-v{VERSION}"


class S3GymEnv(gymnasium.Env):
    """One game in one mode as a Gymnasium environment (see the module's docstring)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, game: str, mode: str = "explore", render_mode: Optional[str] = None) -> None:
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"unknown render mode {render_mode!r}: choose ansi or none")
        self.game = games.make(game, mode)  # GameError (a ValueError) for an unknown game or mode
        self.mode, self.render_mode = mode, render_mode
        self.observation_space = spaces.Text(MAX_OBSERVATION_CHARS, min_length=1, charset=CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        chosen = (options or {}).get("game_seed")
        if chosen is None:
            drawn = DRAWN_SEEDS[self.mode]
            chosen = int(self.np_random.integers(drawn.start, drawn.stop))
        observation = self.game.reset(require_seed_of(self.mode, chosen))
        info = {"game": self.game.name, "mode": self.mode, "game_seed": self.game.seed, "rules": self.game.rules(),
                "answer_format": self.game.answer_format(), "max_steps": self.game.max_steps}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        result = self.game.step(action)
        info = {**dict(result.info), "feedback": result.feedback, "valid": result.valid}
        if result.done:
            info["score"] = self.game.score()
        return result.observation, float(result.reward), bool(result.terminated), bool(result.truncated), info

    def render(self) -> Optional[str]:
        return self.game.observation() if self.render_mode == "ansi" and self.game.seed is not None else None


def register_envs() -> list[str]:
    """Register `s3gym/<game>-<mode>-v0` for every game and mode (again: nothing changes); the ids."""
    ids = []
    for name in games.names():
        for mode in games.MODES:
            ids.append(env_id(name, mode))
            if ids[-1] not in gymnasium.registry:
                gymnasium.register(ids[-1], entry_point=S3GymEnv, kwargs={"game": name, "mode": mode})
    return ids


register_envs()
