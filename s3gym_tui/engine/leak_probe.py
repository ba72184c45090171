"""The learner as a leak detector: a learner episode replayed without the evaluation episodes in its context."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import s3gym_games as games
from s3gym_tui.engine.compare import hint_block
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import TurnRecord, build_messages
from s3gym_games.reply import NO_ANSWER
from s3gym_tui.models import Episode, Step, phase_of_seed

LEARNER = "learner/"
DEFAULT_STEP_CAP = 64  # an episode outside a run (fork, trial, hand play) has the session's default cap
# A History block's title, as engine.experience.episode_block writes it.
_TITLE = re.compile(r"^--- Previous episode \d+ \(seed (?P<seed>-?\d+), \d+ steps\) ---$", re.MULTILINE)

__all__ = ["LeakProbe", "probe", "without_evaluation_blocks", "replay"]


@dataclass(frozen=True)
class LeakProbe:
    """A stored learner episode's score beside the learner's replay of it on its recorded Hint Messages
    block minus every History block of an evaluation seed (`dropped`). The replay is deterministic, so a
    clean context replays to the stored score exactly; a `jump` (stored above replayed) is what the
    evaluation data in the context bought."""

    episode_id: str
    seed: int
    stored: float
    replayed: float
    dropped: tuple[int, ...]  # the evaluation seeds whose History blocks were removed

    @property
    def jump(self) -> float:
        return self.stored - self.replayed


def without_evaluation_blocks(block: str) -> tuple[str, tuple[int, ...]]:
    """A Hint Messages block without its History blocks of evaluation seeds, and those seeds (the text
    unchanged when there are none; a summary has no such blocks)."""
    titles = list(_TITLE.finditer(block))
    dropped = tuple(int(t.group("seed")) for t in titles if phase_of_seed(int(t.group("seed"))) == "eval")
    if not dropped:
        return block, ()
    kept = [block[:titles[0].start()]] if titles[0].start() else []
    for i, title in enumerate(titles):
        end = titles[i + 1].start() if i + 1 < len(titles) else len(block)
        if phase_of_seed(int(title.group("seed"))) != "eval":
            kept.append(block[title.start():end])
    return "\n\n".join(part.strip("\n") for part in kept if part.strip("\n")), dropped


def replay(episode: Episode, steps: Sequence[Step], hint: Optional[str], oracle: bool = False,
           step_cap: int = DEFAULT_STEP_CAP) -> float:
    """The score of `episode`'s game played again by its learner with `hint` under Hint Messages: the
    steps the learner did not choose (a person's, a fork's copied ones) are taken as stored while the
    replay still follows the stored actions; every other step is the learner's reply to the prompt the
    session would build (s3gym_games.prompt.build_messages)."""
    from s3gym_tui.providers.learner import reply

    game = games.make(episode.game, episode.mode)
    game.reset(episode.seed)
    given = int(episode.fork_step or 0)
    turns: list[TurnRecord] = []
    feedback, following = "", True
    while not game.done and len(turns) < step_cap:
        i = len(turns)
        stored = steps[i] if following and i < len(steps) else None
        if stored is not None and (i < given or stored.actor != "model"):
            action, score = stored.action, stored.self_score
        else:
            parsed = parse_reply(reply(episode.game, build_messages(game, hint, turns, feedback)))
            action = parsed.action if parsed.action is not None else NO_ANSWER
            score = parsed.self_score
        following = stored is not None and action == stored.action
        observation = game.observation()
        result = game.step(action)
        turns.append(TurnRecord(observation, action, score, feedback, result.reward if oracle else None))
        feedback = result.feedback
    return game.score()


def _recorded_hint(store, episode: Episode, steps: Sequence[Step]) -> Optional[str]:
    """The Hint Messages block the learner chose its steps with (a fork's copied steps carry its source's)."""
    rules = games.make(episode.game, episode.mode).rules()
    for step in steps[int(episode.fork_step or 0):]:
        prompt = store.prompts.step_prompt(episode.id, step.index) if step.actor == "model" else ""
        if prompt:
            return hint_block(prompt, rules)
    return None


def probe(store, episode: Episode) -> LeakProbe:
    """Replay a finished episode played by `learner/<game>` without the evaluation episodes its context
    held (ValueError for another model's or an unfinished episode)."""
    if not episode.model.startswith(LEARNER):
        raise ValueError(f"episode {episode.id} was played by {episode.model}: only the learner's episodes "
                         f"replay exactly")
    if episode.status != "finished" or episode.score is None:
        raise ValueError(f"episode {episode.id} is not finished")
    steps = store.episodes.steps(episode.id)
    run = store.runs.get_run(episode.run_id) if episode.run_id else None
    hint = _recorded_hint(store, episode, steps)
    cleaned, dropped = without_evaluation_blocks(hint) if hint else (hint, ())
    replayed = replay(episode, steps, cleaned or None,
                      oracle=bool(run and run.config.oracle_feedback),
                      step_cap=run.config.step_cap if run else DEFAULT_STEP_CAP)
    return LeakProbe(episode.id, episode.seed, float(episode.score), float(replayed), dropped)
