"""The paper's prompt for a game state: system contract, Hint Messages, current episode, rules, step prompt.

Public API (the engine builds every prompt with it): `build_messages(game, hint_text, turns, feedback)` gives
the chat messages of an action call; experience enters as text (`hint_text`: previous episodes rendered by
`render_episode_block`, or a summary); `build_summary_messages` / `parse_summary` are Summary Memory's call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from s3gym_games.base import Game

HINT_HEADER = "Hint Messages:"
HISTORY_CUT_MARK = "[{n} older episode(s) dropped to fit the history budget]"

SYSTEM_PROMPT = (
    "You are an agent playing a text game. You will improve by testing your own behaviour and "
    "judging your own experience. With every action you state the immediate reward you expect "
    "that action to earn under the game rules (your self-judged score).\n"
    "End every reply with exactly one line of the form\n"
    "Answer: <ACTION>, Score: <SELF-JUDGED SCORE>\n"
    "or `Answer: END, Score: 0` to stop the episode."
)


@dataclass(frozen=True)
class TurnRecord:
    """One past step as the agent remembers it: what it saw, what it answered, its own score.

    The verifier reward is deliberately absent (main setting): history carries self-scores only.
    `oracle_reward` is filled only by the oracle-feedback ablation.
    """

    observation: str
    action: str
    self_score: Optional[float]
    feedback: str = ""
    oracle_reward: Optional[float] = None


def format_score(score: Optional[float]) -> str:
    if score is None:
        return "?"
    return f"{score:g}"


def render_turns(turns: Iterable[TurnRecord]) -> str:
    """`Env: <observation>` / `LLM: Answer: <action>, Score: <self-score>` lines."""
    lines: list[str] = []
    for turn in turns:
        env = turn.observation if not turn.feedback else f"{turn.feedback}\n{turn.observation}"
        lines.append(f"Env: {env}")
        lines.append(f"LLM: Answer: {turn.action}, Score: {format_score(turn.self_score)}")
        if turn.oracle_reward is not None:
            lines.append(f"(oracle feedback: verifier reward {turn.oracle_reward:g})")
    return "\n".join(lines)


def render_episode_block(title: str, turns: Sequence[TurnRecord], final_observation: str = "") -> str:
    body = render_turns(turns)
    if final_observation:
        body += f"\nEnv: {final_observation}"
    return f"--- {title} ---\n{body}"


def step_prompt(game: Game, feedback: str) -> str:
    """The current-step part: rules, answer syntax, what happened last, the current observation."""
    parts = [
        "Game rules:",
        game.rules(),
        "",
        f"Action syntax: {game.answer_format()}",
        "",
        f"Step {game.steps + 1} of at most {game.max_steps}.",
    ]
    if feedback:
        parts.append(f"Feedback on your last action: {feedback}")
    parts += [
        "Current state:",
        game.observation(),
        "",
        "Think briefly, then end with: Answer: <ACTION>, Score: <SELF-JUDGED SCORE>",
    ]
    return "\n".join(parts)


def user_parts(game: Game, hint_text: Optional[str], current_turns: Sequence[TurnRecord],
               feedback: str) -> list[str]:
    """The user message of an action call in the pieces a prompt cache can keep: Hint Messages,
    then one piece per turn of the current episode, then the step prompt. Joined, they are the
    message exactly. Stable first: within an episode every piece but the last stays the same and
    a new turn is appended, so consecutive calls share everything up to the step prompt."""
    parts: list[str] = []
    if hint_text:
        parts.append(f"{HINT_HEADER}\n{hint_text}\n\n")
    if current_turns:  # each turn ends with its newline; the blank line is the step prompt's
        turns = [render_turns([turn]) + "\n" for turn in current_turns]
        turns[0] = "Current episode so far:\n" + turns[0]
        parts += turns
    parts.append(("\n" if current_turns else "") + step_prompt(game, feedback))
    return parts


def build_messages(game: Game, hint_text: Optional[str], current_turns: Sequence[TurnRecord],
                   feedback: str, split: bool = False) -> list[dict]:
    """The messages sent for one action call, in the order the protocol fixes. `split`: the user
    message as consecutive user messages, one per cacheable piece (user_parts), for providers that
    cache only up to marked blocks (engine.prompt_cache); the text is the same."""
    parts = user_parts(game, hint_text, current_turns, feedback)
    system = {"role": "system", "content": SYSTEM_PROMPT}
    if split:
        return [system] + [{"role": "user", "content": part} for part in parts]
    return [system, {"role": "user", "content": "".join(parts)}]


SUMMARY_SYSTEM = (
    "You review your own past play of a text game and write practical experience for your next "
    "episode. Judge your past actions by the self-judged scores you gave them."
)


def build_summary_messages(game: Game, current_summary: Optional[str], history_text: str) -> list[dict]:
    parts = ["Game rules:", game.rules(), ""]
    if current_summary:
        parts += ["Your current summary of experience:", current_summary, ""]
    parts += [
        "Your previous episodes (each step with your self-judged score):",
        history_text or "(no previous episodes)",
        "",
        "Write your experience in exactly three labelled parts, conditioned on the self-scores:",
        "Strategies to retain: <what worked>",
        "Mistakes to avoid: <what failed>",
        "Directions for the next episode: <what to try next>",
    ]
    return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_summary(reply: str) -> tuple[str, str, str]:
    """Split a summary reply into (retain, avoid, next); a missing part becomes empty."""
    labels = {"strategies to retain": 0, "mistakes to avoid": 1, "directions for the next episode": 2}
    parts = ["", "", ""]
    current: Optional[int] = None
    for raw in (reply or "").replace("\r", "").split("\n"):
        line = raw.replace("**", "").replace("__", "").strip().lstrip("#*-0123456789. ").strip()
        low = line.lower().replace("*", "")
        hit = next((i for label, i in labels.items() if low.startswith(label)), None)
        if hit is not None:
            current = hit
            rest = line.split(":", 1)[1] if ":" in line else ""
            parts[current] = rest.strip()
        elif current is not None and line:
            parts[current] = (parts[current] + "\n" + line).strip()
    if not any(parts):
        parts[2] = (reply or "").strip()[:4000]
    return parts[0], parts[1], parts[2]


def messages_json(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)
