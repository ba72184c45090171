"""The common contract of the seven games: modes, step results, the Game base class, policies."""

from __future__ import annotations

import copy
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Mapping, TypeVar

MODES: tuple[str, ...] = ("explore", "eval")
HARNESS_STEP_CAP = 64
END_ACTION = "END"


class GameError(ValueError):
    """A caller error (unknown game, unknown mode, stepping before reset). Never raised for bad actions."""


@dataclass(frozen=True)
class StepResult:
    """What one step returns. `reward` is the verifier's and must never reach the agent.

    `terminated`: the game ended by its rules (a win, a loss, END, or the last step of a game whose
    length is a rule, see Game.fixed_length). `truncated`: only a step cap stopped it (the game's
    `max_steps` cap or the harness's 64), so it could have gone on; never both.
    """

    observation: str
    feedback: str
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def valid(self) -> bool:
        return bool(self.info.get("valid", True))


@dataclass(frozen=True)
class Outcome:
    """What a game's `_apply` reports for one action; the base class turns it into a StepResult."""

    feedback: str
    reward: float = 0.0
    valid: bool = True
    terminated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Move:
    """A policy's choice: the action text and the immediate reward it expects (its self-score)."""

    action: str
    expected_reward: float


def clean_action(text: str) -> str:
    """Normalise an action string: strip whitespace and one trailing period, collapse inner blanks."""
    text = " ".join(str(text).split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    return text


ConfigT = TypeVar("ConfigT")


class Game(ABC, Generic[ConfigT]):
    """One episode of one game. Construct with a mode, then `reset(seed)`, then `step(action)`.

    Subclasses set `name`, `title`, `description`, `CONFIGS` (mode -> frozen config with a
    `max_steps` field) and implement `_setup`, `_apply`, `observation`, `view`, `render`,
    `rules`, `answer_format`, `action_grammar`, `score`, `sample_action`.
    All randomness must come from `self.rng`.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    description: ClassVar[str]
    CONFIGS: ClassVar[Mapping[str, Any]]
    # True: the rules fix the episode's length at the config's `max_steps` (trust's rounds, chess's
    # predictions), so its last step ends the game (`terminated`). False: `max_steps` is a step cap, and
    # reaching it is `truncated`. Either way the harness's cap (HARNESS_STEP_CAP) only ever truncates.
    fixed_length: ClassVar[bool] = False

    def __init__(self, mode: str = "explore") -> None:
        if mode not in MODES:
            raise GameError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
        self.mode = mode
        self.config: ConfigT = self.CONFIGS[mode]
        self.seed: int | None = None
        self.rng = random.Random(0)
        self.actions: list[str] = []
        self.rewards: list[float] = []
        self.steps = 0
        self.terminated = False
        self.truncated = False

    # ----- lifecycle -------------------------------------------------------------------
    @property
    def max_steps(self) -> int:
        return min(int(self.config.max_steps), HARNESS_STEP_CAP)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def reset(self, seed: int) -> str:
        """Start the episode determined by (game, mode, seed) and return the first observation."""
        self.seed = int(seed)
        self.rng = random.Random(self.seed)
        self.actions = []
        self.rewards = []
        self.steps = 0
        self.terminated = False
        self.truncated = False
        self._setup()
        return self.observation()

    def step(self, action: str) -> StepResult:
        """Apply one action text. Never raises for any action string."""
        if self.seed is None:
            raise GameError("call reset(seed) before step()")
        if self.done:
            return StepResult(self.observation(), "The episode is over; no more actions are taken.",
                              0.0, self.terminated, self.truncated, {"valid": False, "over": True})
        text = clean_action(action if isinstance(action, str) else str(action))
        if text.upper() == END_ACTION:
            outcome = Outcome("You ended the episode.", 0.0, True, True, {"end": True})
        else:
            outcome = self._apply(text)
        self.actions.append(str(action))
        self.rewards.append(float(outcome.reward))
        self.steps += 1
        self.terminated = self.terminated or outcome.terminated
        if not self.terminated and self.steps >= self.max_steps:
            if self.fixed_length and self.steps >= self.config.max_steps:
                self.terminated = True  # the game's last step by its rules: its natural end
            else:
                self.truncated = True  # a cap stopped a game that could have gone on
        info = {"valid": outcome.valid, "step": self.steps, **dict(outcome.info)}
        return StepResult(self.observation(), outcome.feedback, float(outcome.reward),
                          self.terminated, self.truncated, info)

    # ----- snapshots and replay --------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the whole episode state (RNG included)."""
        state = copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "rng"})
        state["rng_state"] = self.rng.getstate()
        return state

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        state = copy.deepcopy(dict(snapshot))
        rng_state = state.pop("rng_state")
        self.__dict__.update(state)
        self.rng = random.Random()
        self.rng.setstate(rng_state)

    @classmethod
    def replay(cls, mode: str, seed: int, actions: list[str]) -> "Game":
        """Rebuild an episode from its seed and actions (stops early if the episode ended)."""
        game = cls(mode)
        game.reset(seed)
        for action in actions:
            if game.done:
                break
            game.step(action)
        return game

    @classmethod
    def same_action(cls, a: str, b: str) -> bool:
        """Whether two action texts name the same move: equal after normalisation, ignoring case (a game
        whose actions are case-sensitive, like chess's piece letters, compares them as written)."""
        return clean_action(a).casefold() == clean_action(b).casefold()

    # ----- what subclasses provide -----------------------------------------------------
    @abstractmethod
    def _setup(self) -> None:
        """Build the initial state from self.rng and self.config."""

    @abstractmethod
    def _apply(self, action: str) -> Outcome:
        """Parse and apply a cleaned action. Invalid actions return Outcome(valid=False)."""

    @abstractmethod
    def observation(self) -> str:
        """Plain-ASCII text the model sees, same layout every step."""

    @abstractmethod
    def view(self) -> Any:
        """Agent-visible state as a structured value (exactly the information in the observation)."""

    @abstractmethod
    def render(self) -> Any:
        """A rich renderable of the same information as the observation, for the terminal UI."""

    @abstractmethod
    def rules(self) -> str:
        """The game's rules for this mode, used as the system prompt (no verifier rewards)."""

    @abstractmethod
    def answer_format(self) -> str:
        """The exact answer syntax, e.g. `<column> <rotation>`, with one example."""

    @abstractmethod
    def action_grammar(self) -> str:
        """A GBNF rule body (no `root ::=`) matching well-formed actions in the current state."""

    @abstractmethod
    def score(self) -> float:
        """The verifier's final score of the trajectory so far."""

    @abstractmethod
    def sample_action(self, rng: random.Random) -> str:
        """A random, syntactically plausible action (used by random baselines and fuzzing)."""

    # ----- facts used by the metrics ----------------------------------------------------
    @classmethod
    @abstractmethod
    def score_eps(cls, mode: str) -> float:
        """The smallest non-zero score step (NABA's eps)."""

    @classmethod
    @abstractmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        """The (min, max) score an episode can reach in this mode."""

    @classmethod
    def score_per_reward(cls, mode: str) -> float:
        """How the final score follows from the step rewards: at every step, `score()` equals
        `score_per_reward(mode) * sum(rewards)`. 1 unless the rules say otherwise (chess: 1 / max_steps,
        its score being the mean step reward over all the steps it could take, so that ending early
        costs; its rewards then sum to up to max_steps while its score is at most 1)."""
        return 1.0

    @classmethod
    @abstractmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """The (min, max) verifier reward one step can pay in this mode, from the rules: the range of
        the immediate reward a self-score states (an invalid action and END pay 0, inside it)."""


class Policy(ABC):
    """A scripted player. It sees only `game.view()` (agent-visible state) and returns a Move."""

    @abstractmethod
    def act(self, view: Any) -> Move:
        """Choose the next action from the agent-visible state."""


def play(game: Game, policy: Policy, seed: int) -> Game:
    """Run a policy through a whole episode and return the finished game."""
    game.reset(seed)
    while not game.done:
        game.step(policy.act(game.view()).action)
    return game
