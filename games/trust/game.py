"""Trust Evolution game: rounds of collaborate/cheat against one of eight hidden opponents."""

from __future__ import annotations

import random
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from s3gym_games.base import Game, Outcome

COLLABORATE, CHEAT = "collaborate", "cheat"
MOVES = (COLLABORATE, CHEAT)
# (agent move, opponent move) -> agent payoff
PAYOFF = {
    (COLLABORATE, COLLABORATE): 2,
    (COLLABORATE, CHEAT): -1,
    (CHEAT, COLLABORATE): 3,
    (CHEAT, CHEAT): 0,
}
OPPONENTS = ("copycat", "always-collaborate", "always-cheat", "grudger", "detective",
             "copykitten", "simpleton", "random")
# Explore mode favours the easy opponents: weight 3 for the three easy ones, 1 for the rest.
EXPLORE_WEIGHTS = (3, 3, 3, 1, 1, 1, 1, 1)


@dataclass(frozen=True)
class TrustConfig:
    max_steps: int
    opponent_weights: tuple[int, ...]


@dataclass(frozen=True)
class TrustView:
    round: int  # 1-based number of the round about to be played
    max_rounds: int
    agent_moves: tuple[str, ...]
    opponent_moves: tuple[str, ...]


def opponent_move(strategy: str, agent: list[str], opponent: list[str], rng: random.Random) -> str:
    """The hidden opponent's move for the next round, from both histories (agent's, its own)."""
    n = len(agent)
    if strategy == "always-collaborate":
        return COLLABORATE
    if strategy == "always-cheat":
        return CHEAT
    if strategy == "copycat":
        return COLLABORATE if n == 0 else agent[-1]
    if strategy == "grudger":
        return CHEAT if CHEAT in agent else COLLABORATE
    if strategy == "detective":
        opening = (COLLABORATE, CHEAT, COLLABORATE, COLLABORATE)
        if n < 4:
            return opening[n]
        if CHEAT not in agent[:4] and CHEAT not in agent[4:]:
            return CHEAT
        return agent[-1]
    if strategy == "copykitten":
        return CHEAT if n >= 2 and agent[-1] == CHEAT and agent[-2] == CHEAT else COLLABORATE
    if strategy == "simpleton":
        if n == 0:
            return COLLABORATE
        # win-stay, lose-shift: the opponent keeps its move if the agent collaborated last round
        # (it was rewarded), and switches if the agent cheated.
        if agent[-1] == COLLABORATE:
            return opponent[-1]
        return CHEAT if opponent[-1] == COLLABORATE else COLLABORATE
    if strategy == "random":
        return COLLABORATE if rng.random() < 0.5 else CHEAT
    raise ValueError(f"unknown opponent strategy {strategy!r}")


class TrustGame(Game[TrustConfig]):
    """Trust Evolution.

    Choices where the spec is silent:
    - Detective: plays collaborate, cheat, collaborate, collaborate; from round 5 it always cheats if
      the agent has never cheated so far, otherwise it plays copycat (copies the agent's last move).
    - Simpleton (win-stay, lose-shift): after a round in which the agent collaborated (a "win" for
      simpleton) it repeats its own last move; after the agent cheated it switches.
    - The random opponent draws from the episode RNG only when a round is actually played.
    - Explore weights: 3 for always-collaborate, always-cheat and copycat, 1 for each other.
    """

    name = "trust"
    fixed_length = True  # the rules' max steps are its length: the last one ends the game
    title = "Trust Evolution"
    description = "Iterated prisoner's dilemma against a hidden opponent strategy."
    CONFIGS = {
        "explore": TrustConfig(max_steps=10, opponent_weights=EXPLORE_WEIGHTS),
        "eval": TrustConfig(max_steps=10, opponent_weights=(1,) * len(OPPONENTS)),
    }

    def _setup(self) -> None:
        self.opponent = self.rng.choices(OPPONENTS, weights=self.config.opponent_weights, k=1)[0]
        self.agent_moves: list[str] = []
        self.opponent_moves: list[str] = []
        self.total = 0

    def _apply(self, action: str) -> Outcome:
        move = action.lower()
        if move not in MOVES:
            return Outcome(f"Invalid action: {action[:40]!r}; answer collaborate or cheat. "
                           "No round was played.", valid=False)
        other = opponent_move(self.opponent, self.agent_moves, self.opponent_moves, self.rng)
        payoff = PAYOFF[(move, other)]
        self.agent_moves.append(move)
        self.opponent_moves.append(other)
        self.total += payoff
        return Outcome(f"Round {len(self.agent_moves)}: you {move}, the opponent chose to {other}.",
                       float(payoff), info={"opponent_move": other})

    def view(self) -> TrustView:
        return TrustView(len(self.agent_moves) + 1, self.max_steps,
                         tuple(self.agent_moves), tuple(self.opponent_moves))

    def observation(self) -> str:
        played = len(self.agent_moves)
        header = (f"Game over after {played} round(s)." if self.done
                  else f"Round: {played + 1} of {self.max_steps}")
        lines = [header, "History (you / opponent):"]
        if not self.agent_moves:
            lines.append("  (no rounds played yet)")
        for i, (a, o) in enumerate(zip(self.agent_moves, self.opponent_moves), start=1):
            lines.append(f"  {i}: {a} / {o}")
        return "\n".join(lines)

    def render(self) -> Table:
        played = len(self.agent_moves)
        title = f"Game over after {played} rounds" if self.done else f"Round {played + 1} of {self.max_steps}"
        table = Table(title=title, expand=False)
        table.add_column("#", justify="right")
        table.add_column("you")
        table.add_column("opponent")
        style = {COLLABORATE: "green", CHEAT: "red"}
        for i, (a, o) in enumerate(zip(self.agent_moves, self.opponent_moves), start=1):
            table.add_row(str(i), Text(a, style=style[a]), Text(o, style=style[o]))
        return table

    def rules(self) -> str:
        return (
            "Trust Evolution. Each round you and a hidden opponent each choose to collaborate or "
            "cheat. Your payoff: both collaborate +2; you collaborate and the opponent cheats -1; "
            "you cheat and the opponent collaborates +3; both cheat 0. The opponent follows one "
            "fixed strategy for the whole game, which you must infer from its moves. Per-round "
            f"payoffs are not shown. The game lasts {self.max_steps} rounds; an invalid answer "
            "wastes a round without playing it. Maximise your total payoff."
        )

    def answer_format(self) -> str:
        return "collaborate | cheat   (example: collaborate)"

    def action_grammar(self) -> str:
        return '"collaborate" | "cheat"'

    def score(self) -> float:
        return float(self.total)

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(MOVES)

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        rounds = cls.CONFIGS[mode].max_steps
        return (-1.0 * rounds, 3.0 * rounds)

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """One round's payoff: from -1 (collaborating while cheated) to 3 (cheating a collaborator)."""
        return (float(min(PAYOFF.values())), float(max(PAYOFF.values())))
