"""The pathways as objects: what each one carries from exploration into an episode, what it puts in the
prompt, what it costs in tokens and how it is described. One registry; a run's pathway is a name in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from s3gym_tui.engine.experience import ExperienceState, effective_budget, history_window
from s3gym_tui.models import RunConfig, Summary

SUMMARY_TOKENS = 400  # a written summary (three short sections), as Hint Messages and in the next summary call


class ExperienceSource(Protocol):
    """What a pathway reads its experience from: a protocol run (engine.runner.ProtocolRunner)."""

    config: RunConfig

    def _finished_explore(self, x: int) -> Sequence[tuple[Any, Sequence[Any]]]: ...

    async def summary_for(self, x: int) -> Optional[Summary]: ...


@dataclass(frozen=True)
class Pathway:
    """A way to use experience. `name` is what runs store; the rest is what the engine asks of it."""

    name: str
    description: str
    uses_experience: bool = False  # its prompt carries something from exploration
    writes_summaries: bool = False  # the model is asked to summarise between exploration episodes
    trained: bool = False  # the experience is in a checkpoint's weights, not in the prompt

    def hint_tokens(self, x: int, budget: int, episode_tokens: int) -> int:
        """Tokens its Hint Messages take at state x (`episode_tokens`: one exploration episode as
        history; `budget`: the history budget fitted to the model)."""
        return 0

    def summary_states(self, explore_episodes: int) -> range:
        """The states x whose summary is written (x exploration episodes seen)."""
        return range(0)

    async def experience(self, runner: ExperienceSource, x: int) -> ExperienceState:
        """The agent's experience after x exploration episodes of `runner`'s run (the run writes the
        summary of state x if it is missing)."""
        return self.seen(x, runner.config.model, runner.config, lambda: runner._finished_explore(x),
                         lambda: None)

    def seen(self, x: int, model: str, config: RunConfig, episodes: Callable[[], Sequence[tuple[Any, Sequence[Any]]]],
             summary: Callable[[], Optional[Summary]]) -> ExperienceState:
        """What `model` sees at state x of a run with `config`, from what is already stored: `episodes`
        (the finished exploration episodes it may see, with their steps) and `summary` (the version its
        state uses) are read only by the pathway that needs them. The one place a window is built."""
        return ExperienceState(x, self.name)


class _History(Pathway):
    def hint_tokens(self, x: int, budget: int, episode_tokens: int) -> int:
        return min(budget, x * episode_tokens)

    def seen(self, x, model, config, episodes, summary) -> ExperienceState:
        # the run's own context size fits only the run's own model (a fork may choose another)
        budget = effective_budget(model, config.history_budget, config.max_tokens,
                                  config.context_tokens if model == config.model else None)
        window = history_window(model, episodes(), budget, config.oracle_feedback)
        return ExperienceState(x, self.name, history=window)


class _Summary(Pathway):
    def hint_tokens(self, x: int, budget: int, episode_tokens: int) -> int:
        return SUMMARY_TOKENS if x > 0 else 0

    def summary_states(self, explore_episodes: int) -> range:
        return range(1, explore_episodes + 1)  # the summary of state x is written as episode x starts

    async def experience(self, runner: ExperienceSource, x: int) -> ExperienceState:
        return ExperienceState(x, self.name, summary=await runner.summary_for(x))

    def seen(self, x, model, config, episodes, summary) -> ExperienceState:
        return ExperienceState(x, self.name, summary=summary())


NONE = Pathway("none", "no experience: every episode starts from the rules alone")
HISTORY = _History("history", "raw history: earlier exploration episodes as played, newest kept within the "
                              "token budget", uses_experience=True)
SUMMARY = _Summary("summary", "summary memory: the model's own score-conditioned summary of its exploration, "
                              "rewritten after each episode", uses_experience=True, writes_summaries=True)
TRAINED = Pathway("trained", "training: a checkpoint trained on the exploration, prompted as `none`",
                  trained=True)

REGISTRY: dict[str, Pathway] = {p.name: p for p in (NONE, HISTORY, SUMMARY, TRAINED)}
IN_CONTEXT = tuple(p.name for p in REGISTRY.values() if p.uses_experience)  # ("history", "summary")


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def pathway(name: str) -> Pathway:
    """The pathway called `name`; a one-line error naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown pathway {name!r}: known are {', '.join(REGISTRY)}") from None
