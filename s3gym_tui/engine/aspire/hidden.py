"""Hidden evaluation (controller side only): a candidate on its goal's suite, in strict mode.

Strict: eval mode, the suite's held-out seeds, no exploration, the candidate frozen (its model and its
pinned memories). Per game the mean episode score scaled to 0..1 by the game's score range; the
aggregate is the weighted mean over the suite's games, undefined (None) if any game's is.
"""

from __future__ import annotations

from typing import Optional

import s3gym_games as games
from s3gym_tui.engine.aspire.episodes import play_run
from s3gym_tui.engine.aspire.goals import GOALS, Goal, HiddenSuite, goal_by_id
from s3gym_tui.store.aspire import AspireRun, Candidate, HiddenScore


def suite_of(store, run: AspireRun, goals: tuple[Goal, ...] = GOALS) -> HiddenSuite:
    """The hidden suite `run` is judged on: its goal's games on seeds drawn from the store's secret, or
    for a run stored before stores had one (suite 'fixed') the seeds of the source it was judged on.
    KeyError when its goal is not in `goals`."""
    suite = goal_by_id(run.goal_id, goals).suite
    return suite if run.suite == "fixed" else suite.drawn(store.aspire.aspire_suite_secret(), run.goal_id)


def scaled(game: str, score: Optional[float]) -> Optional[float]:
    if score is None:
        return None
    low, high = games.game_class(game).score_range("eval")
    return (score - low) / (high - low) if high > low else None


def known_score(store, aspire_id: str, candidate_id: str) -> Optional[HiddenScore]:
    for row in store.aspire.hidden_scores(aspire_id):
        if row.candidate_id == candidate_id:
            return row
    return None


async def hidden_score(store, aspire_id: str, candidate: Candidate, suite: HiddenSuite, step_cap: int,
                       purpose: str = "candidate") -> HiddenScore:
    """The candidate's hidden score (played once; later calls, and other purposes, reuse it)."""
    known = known_score(store, aspire_id, candidate.id)
    if known is not None:
        if known.purpose != purpose:
            return store.aspire.set_hidden_score(aspire_id, candidate.id, purpose, known.score, known.per_game,
                                                 known.episodes, known.run_ids)
        return known
    per_game: dict[str, Optional[float]] = {}
    run_ids: list[str] = []
    episodes = 0
    for k, part in enumerate(suite.games):
        played = await play_run(store, aspire_id=aspire_id, role="hidden", candidate=candidate, game=part.game,
                                memory="summary", seed=part.seed_base, episodes=part.episodes,
                                step_cap=step_cap, evaluation=True, run_id=f"{candidate.id}-h{k}")
        run_ids.append(played.run_id)
        values = [scaled(part.game, store.episodes.get_episode(e).score) for e in played.episode_ids]
        finished = [v for v in values if v is not None]
        episodes += len(finished)
        per_game[part.game] = sum(finished) / len(finished) if finished and len(finished) == len(values) else None
    weights = sum(p.weight for p in suite.games)
    parts = [per_game[p.game] for p in suite.games]
    aggregate = (None if any(v is None for v in parts) or weights <= 0
                 else sum(p.weight * per_game[p.game] for p in suite.games) / weights)  # type: ignore[operator]
    return store.aspire.set_hidden_score(aspire_id, candidate.id, purpose, aggregate, per_game, episodes, run_ids)
