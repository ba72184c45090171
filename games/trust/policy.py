"""Trust reference policy: keep the opponent strategies consistent with what was seen, then plan."""

from __future__ import annotations

import functools
import random

from s3gym_games.base import Move, Policy
from s3gym_games.trust.game import CHEAT, COLLABORATE, OPPONENTS, PAYOFF, TrustView, opponent_move

DETERMINISTIC = tuple(o for o in OPPONENTS if o != "random")
_NO_RNG = random.Random(0)  # never drawn from: deterministic strategies do not use it


def consistent_strategies(view: TrustView) -> list[str]:
    """Opponent strategies that would have produced exactly the observed opponent moves."""
    alive = []
    for strategy in DETERMINISTIC:
        ok = all(
            opponent_move(strategy, list(view.agent_moves[:i]), list(view.opponent_moves[:i]), _NO_RNG)
            == view.opponent_moves[i]
            for i in range(len(view.opponent_moves))
        )
        if ok:
            alive.append(strategy)
    return alive


@functools.lru_cache(maxsize=4096)
def _best_plan(strategies: tuple[str, ...], with_random: bool, agent: tuple[str, ...], opponent: tuple[str, ...],
               rounds_left: int) -> tuple[float, str]:
    """Best open-loop move sequence against a uniform mixture; returns (value, first move). A pure
    function of its arguments, searched once per distinct position (the scripted player meets the
    same positions in every run and checkpoint of a sweep)."""
    weight = 1.0 / (len(strategies) + (1 if with_random else 0))
    best = (-1e9, COLLABORATE)

    def dfs(depth: int, hist: dict[str, tuple[list[str], list[str]]], value: float, first: str | None) -> None:
        nonlocal best
        if depth == rounds_left:
            if value > best[0]:
                best = (value, first or COLLABORATE)
            return
        for move in (COLLABORATE, CHEAT):
            gained = 0.0
            new_hist = {}
            for s, (a, o) in hist.items():
                other = opponent_move(s, a, o, _NO_RNG)
                gained += weight * PAYOFF[(move, other)]
                new_hist[s] = (a + [move], o + [other])
            if with_random:
                gained += weight * (PAYOFF[(move, COLLABORATE)] + PAYOFF[(move, CHEAT)]) / 2
            dfs(depth + 1, new_hist, value + gained, first or move)

    dfs(0, {s: (list(agent), list(opponent)) for s in strategies}, 0.0, None)
    return best


class TrustPolicy(Policy):
    """Infers the hidden opponent from the history (consistency check over the eight strategies,
    random kept plausible for the first rounds and whenever no deterministic strategy fits) and
    replans each round with an exhaustive open-loop look-ahead to the last round against a uniform
    mixture of what is still plausible. It does not value information, so it never probes a
    forgiving opponent with a cheat (that would cost a lot against grudger)."""

    def act(self, view: TrustView) -> Move:
        alive = consistent_strategies(view)
        rounds_left = view.max_rounds - len(view.agent_moves)
        # random stays plausible only if no deterministic strategy explains the history well
        with_random = not alive or len(view.opponent_moves) < 3
        if rounds_left <= 0:
            return Move(CHEAT, 0.0)
        _, move = _best_plan(tuple(alive), with_random, tuple(view.agent_moves), tuple(view.opponent_moves),
                             min(rounds_left, 10))
        expected = self._expected(alive, with_random, view, move)
        return Move(move, round(expected, 3))

    @staticmethod
    def _expected(alive: list[str], with_random: bool, view: TrustView, move: str) -> float:
        payoffs = [PAYOFF[(move, opponent_move(s, list(view.agent_moves), list(view.opponent_moves), _NO_RNG))]
                   for s in alive]
        if with_random:
            payoffs.append((PAYOFF[(move, COLLABORATE)] + PAYOFF[(move, CHEAT)]) / 2)
        return sum(payoffs) / len(payoffs) if payoffs else 0.0
