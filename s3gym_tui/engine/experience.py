"""The pathways: what the agent sees of its past (nothing, raw history, or summary tips)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from s3gym_games.prompt import HISTORY_CUT_MARK, TurnRecord, render_episode_block
from s3gym_tui.engine.tokens import count_tokens
from s3gym_tui.models import Episode, Step, Summary


class HeldOutViolation(RuntimeError):
    """An evaluation episode was about to become experience. Never caught silently."""


@dataclass(frozen=True)
class HistoryWindow:
    """Previous exploration episodes that fit the budget, oldest dropped first."""

    text: str
    episode_ids: tuple[str, ...]
    dropped: int
    tokens: int


@dataclass(frozen=True)
class ExperienceState:
    """What the agent carries into an episode: frozen at an exploration count x."""

    x: int
    pathway: str
    history: Optional[HistoryWindow] = None
    summary: Optional[Summary] = None

    def hint_text(self) -> Optional[str]:
        """What goes in the prompt as Hint Messages: the state holds only what its pathway gave it
        (engine.pathways), the history window's text or the summary's tips."""
        if self.history is not None and self.history.text:
            return self.history.text
        if self.summary is not None:
            return self.summary.as_tips()
        return None


def turns_from_steps(steps: Sequence[Step], oracle: bool = False) -> list[TurnRecord]:
    """The agent's memory of an episode: observations, its answers, its own scores (no rewards)."""
    turns: list[TurnRecord] = []
    previous_feedback = ""
    for step in steps:
        turns.append(TurnRecord(step.observation, step.action, step.self_score, previous_feedback,
                                step.reward if oracle else None))
        previous_feedback = step.feedback
    return turns


def episode_block(episode: Episode, steps: Sequence[Step], oracle: bool = False) -> str:
    title = f"Previous episode {episode.index + 1} (seed {episode.seed}, {len(steps)} steps)"
    return render_episode_block(title, turns_from_steps(steps, oracle))


def history_window(model: str, episodes: Sequence[tuple[Episode, Sequence[Step]]], budget: int,
                   oracle: bool = False) -> HistoryWindow:
    """Serialise previous exploration episodes, dropping the oldest until the rest fit `budget`."""
    blocks = _blocks(model, episodes, oracle)
    kept: list[tuple[str, str, int]] = []
    total = 0
    for block in reversed(blocks):  # newest first
        if total + block[2] > budget:
            break
        kept.append(block)
        total += block[2]
    kept.reverse()
    return _window(kept, len(blocks) - len(kept))


def exact_window(model: str, kept: Sequence[tuple[Episode, Sequence[Step]]], dropped: int,
                 oracle: bool = False) -> HistoryWindow:
    """The window an episode saw, rebuilt from its record: exactly these episodes, with the mark of
    `dropped` older ones cut (no budget is applied again: the text is the one it was shown)."""
    return _window(_blocks(model, kept, oracle), dropped)


def _blocks(model: str, episodes: Sequence[tuple[Episode, Sequence[Step]]],
            oracle: bool) -> list[tuple[str, str, int]]:
    blocks: list[tuple[str, str, int]] = []
    for episode, steps in episodes:
        if episode.phase != "explore":
            raise HeldOutViolation(f"episode {episode.id} is an evaluation episode and cannot be history")
        text = episode_block(episode, steps, oracle)
        blocks.append((episode.id, text, count_tokens(model, text)))
    return blocks


def _window(kept: Sequence[tuple[str, str, int]], dropped: int) -> HistoryWindow:
    text = "\n\n".join(b[1] for b in kept)
    if dropped and kept:
        text = HISTORY_CUT_MARK.format(n=dropped) + "\n\n" + text
    elif dropped:
        text = HISTORY_CUT_MARK.format(n=dropped)
    return HistoryWindow(text, tuple(b[0] for b in kept), dropped, sum(b[2] for b in kept))


def effective_budget(model: str, history_budget: int, max_tokens: int, window: Optional[int] = None) -> int:
    """The history budget, shrunk to the model's context window when that is smaller (`window`:
    the context its server stated, engine.servers; else litellm's model info)."""
    if not window:
        try:
            from s3gym_tui.providers import context_window

            window = context_window(model)
        except Exception:
            window = None
    if not window:
        return history_budget
    reserve = min(max_tokens, window // 4) + 1500  # room for the reply, rules and current episode
    return max(0, min(history_budget, window - reserve))
