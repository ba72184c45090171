"""SFT datasets from a run's exploration steps: the prompt exactly as the agent saw it -> its reply.

A step whose self-judged score clears the threshold (s > threshold; no threshold: every reply the
model gave) is kept; the rest are dropped, or replaced by a corrected reply when a correction source is
set ('reference': the game's reference policy in the replayed state; any other string: that litellm
model, asked the same prompt). When a token counter is given, every example's length is stored with
it, and an example longer than the length limit is dropped with that reason (named, never truncated
in silence). The verifier reward never selects anything: it only measures the selection afterwards
(precision, recall).

A person's annotations (store/annotations.py) can steer it: `exclude_labels` drops every step that
carries one of those labels (on the step itself; 'any': any label), and `annotated_corrections`
makes a step with a corrected action a "corrected" example whose reply is that action (checked valid
by replaying the game; its score is the self-score the agent stated at that step: no reward is looked at),
whatever its self-score. A corrected step is used even if its label is excluded. The build says
how many steps each rule touched (rule: labelled_excluded, human_corrections). Evaluation steps never enter: they are filtered out, asserted absent, and
refused by the store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import s3gym_games as games
from s3gym_tui.engine.visibility import Vantage, is_evaluation, visible_episodes
from s3gym_tui.models import Episode, Frozen, Step
from s3gym_tui.store import Dataset, DatasetRow, LeakageError, StoreError

REFERENCE = "reference"
Progress = Callable[[int, int], None]  # (steps considered, steps in total)
Measure = Callable[[list], int]  # tokens of a chat example (prompt + reply) with the training tokenizer
TOO_LONG = "longer than the length limit"


def parse_correction(value: Optional[str]) -> Optional[str]:
    """None for no correction ('' / 'none'), 'reference', or a litellm model string."""
    text = (value or "").strip()
    if text.lower() in ("", "none", "no", "off"):
        return None
    return REFERENCE if text.lower() == REFERENCE else text


is_eval_episode = is_evaluation  # evaluation data by any of its marks: phase, mode or seed range


class SelectionQuality(Frozen):
    """How the self-judged selection looks against the verifier (benchmark side only)."""

    steps: int  # steps considered (rows of every kind)
    kept: int
    corrected: int
    dropped: int
    kept_positive: int  # kept steps with verifier reward > 0
    positives: int  # considered steps with verifier reward > 0
    precision: Optional[float]  # kept_positive / kept
    recall: Optional[float]  # kept_positive / positives


@dataclass(frozen=True)
class TooLong:
    """An example dropped because it would not fit: where it came from and how long it is."""

    episode_id: str
    episode_index: int
    step_index: int
    tokens: int


@dataclass(frozen=True)
class AnnotationUse:
    """How the person's annotations shaped a dataset (what `s3gym dataset` says)."""

    excluded_labels: tuple[str, ...] = ()
    labelled_excluded: int = 0  # steps dropped because of their label
    corrections_used: int = 0  # steps whose corrected action became the example
    corrections_refused: int = 0  # corrected actions the game did not accept in that state


@dataclass(frozen=True)
class DatasetBuild:
    dataset: Dataset
    quality: SelectionQuality
    excluded_eval_steps: int  # evaluation steps of the run that were never considered
    too_long: tuple[TooLong, ...] = ()  # examples dropped by the length limit (named in the output)
    longest: Optional[int] = None  # tokens of the longest example kept (when measured)
    limit: Optional[int] = None  # the length limit applied (None: none, or not measured)
    annotations: AnnotationUse = AnnotationUse()


@dataclass(frozen=True)
class Exported:
    prompt_completion: Path  # TRL conversational prompt/completion (loss on the reply only)
    messages: Path  # OpenAI fine-tuning {"messages": [...]} (also TRL's conversational LM format)
    count: int


# ----- which steps ------------------------------------------------------------------------------
def exploration_steps(store, run_id: str, episode_ids: Optional[Sequence[str]] = None
                      ) -> tuple[list[tuple[Episode, list[Step]]], int]:
    """The run's exploration episodes with their steps (prompts not loaded), and the number of
    evaluation steps left out. Asking for an evaluation episode by id raises LeakageError.

    What a training may see is decided by engine.visibility: the run's state after all its
    exploration episodes, counting an interrupted one too (its steps are the agent's own play)."""
    run = store.runs.get_run(run_id)
    training = Vantage.state(run.id, run.config.explore_episodes)
    episodes = store.episodes.list(run_id)
    if episode_ids is not None:
        by_id = {e.id: e for e in episodes}
        for episode_id in episode_ids:
            episode = by_id.get(episode_id) or store.episodes.find_episode(episode_id)
            if episode is None or episode.run_id != run_id:
                raise StoreError(f"episode {episode_id!r} is not an episode of run {run_id!r}")
            if is_eval_episode(episode):
                raise LeakageError(f"episode {episode_id!r} is an evaluation episode: evaluation steps "
                                   f"never become training data")
        wanted = set(episode_ids)
        episodes = [e for e in episodes if e.id in wanted]
    excluded = sum(e.n_steps for e in episodes if is_eval_episode(e))
    chosen = visible_episodes(store, training, finished=False, candidates=episodes)
    return [(e, store.episodes.steps(e.id, include_prompt=False)) for e in chosen], excluded


def _prompt_messages(store, step: Step) -> Optional[list[dict[str, Any]]]:
    text = store.prompts.step_prompt(step.episode_id, step.index)
    if not text:
        return None
    try:
        messages = json.loads(text)
    except ValueError:
        return None
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m and "content" in m
                                                 for m in messages):
        return None
    return [{"role": str(m["role"]), "content": m["content"]} for m in messages]


# ----- corrections -------------------------------------------------------------------------------
def reference_reply(episode: Episode, actions_before: Sequence[str]) -> Optional[str]:
    """The reference policy's answer line in the state the agent saw (None if the game is over)."""
    env = games.game_class(episode.game).replay(episode.mode, episode.seed, list(actions_before))
    if env.done:
        return None
    move = games.reference_policy(episode.game).act(env.view())
    return f"Answer: {move.action}, Score: {move.expected_reward:g}"


async def model_reply(model: str, episode: Episode, actions_before: Sequence[str],
                      messages: list[dict[str, Any]], max_tokens: int = 2048) -> Optional[str]:
    """Another model's reply to the same prompt, if it follows the contract with an action the game
    accepts (validity is what the agent's feedback shows anyway; no reward is looked at)."""
    from s3gym_tui.engine.llm import CallSettings, complete
    from s3gym_games.reply import parse_reply

    env = games.game_class(episode.game).replay(episode.mode, episode.seed, list(actions_before))
    if env.done:
        return None
    context = {"task": "act", "game": episode.game, "mode": episode.mode, "seed": episode.seed,
               "actions": list(actions_before), "grammar": env.action_grammar()}
    result = await complete(CallSettings(model=model, max_tokens=max_tokens, max_retries=2), messages, context)
    parsed = parse_reply(result.reply)
    if parsed.action is None or parsed.self_score is None:
        return None
    return result.reply if env.step(parsed.action).valid else None


def annotated_reply(episode: Episode, actions_before: Sequence[str], action: str,
                    self_score: Optional[float]) -> Optional[str]:
    """A person's corrected action as an answer line, if the game accepts it in that state (validity
    is what the agent's feedback shows anyway); None otherwise. Its score is the self-score the agent
    stated at that step: the self-judged score is the only signal that may shape training data, so
    the reward the game would give the corrected action is never looked at. None without a self-score."""
    if self_score is None:
        return None
    env = games.game_class(episode.game).replay(episode.mode, episode.seed, list(actions_before))
    if env.done or not env.step(action).valid:
        return None
    return f"Answer: {action}, Score: {self_score:g}"


# ----- building ----------------------------------------------------------------------------------
async def build_dataset(store, run_id: str, *, threshold: Optional[float] = 0.0, correction: Optional[str] = None,
                        max_examples: Optional[int] = None, episode_ids: Optional[Sequence[str]] = None,
                        progress: Optional[Progress] = None, measure: Optional[Measure] = None,
                        max_length: Optional[int] = None, exclude_labels: Sequence[str] = (),
                        annotated_corrections: bool = False) -> DatasetBuild:
    """Select, correct, measure (tokens, with `measure`), store (with rule and counts) a dataset from
    run `run_id`. threshold None keeps every reply of the model; `max_length` needs `measure`.
    `exclude_labels` and `annotated_corrections`: see the module docstring."""
    if max_length is not None and measure is None:
        raise ValueError("a length limit needs a token counter (measure)")
    run = store.runs.get_run(run_id)
    correction = parse_correction(correction)
    pairs, excluded = exploration_steps(store, run_id, episode_ids)
    assert not any(is_eval_episode(e) for e, _ in pairs), "evaluation episodes must never be considered"
    total = sum(len(steps) for _, steps in pairs)
    rows: list[DatasetRow] = []
    reasons: dict[str, int] = {}
    too_long: list[TooLong] = []
    longest: Optional[int] = None
    examples = seen = 0

    def drop(step: Step, reason: str, tokens: Optional[int] = None, detail: str = "") -> None:
        rows.append(DatasetRow(episode_id=step.episode_id, step_index=step.index, kind="dropped",
                               reason=reason + detail, tokens=tokens))
        reasons[reason] = reasons.get(reason, 0) + 1

    def add(episode: Episode, step: Step, kind: str, example: list[dict[str, Any]]) -> bool:
        """Keep (or correct) an example unless it is too long; True if it was added."""
        nonlocal longest
        tokens = measure(example) if measure is not None else None
        if tokens is not None and max_length is not None and tokens > max_length:
            too_long.append(TooLong(step.episode_id, episode.index, step.index, tokens))
            drop(step, TOO_LONG, tokens, f" ({tokens} > {max_length} tokens)")
            return False
        rows.append(DatasetRow(episode_id=step.episode_id, step_index=step.index, kind=kind,
                               messages=tuple(example), tokens=tokens))
        if tokens is not None:
            longest = tokens if longest is None else max(longest, tokens)
        return True

    excluded_labels = tuple(dict.fromkeys(exclude_labels))
    labelled_excluded = corrections_used = corrections_refused = 0
    for episode, steps in pairs:
        if max_examples is not None and examples >= max_examples:
            break
        notes = store.annotations.annotations_of_steps(episode.id) if (excluded_labels or annotated_corrections) else {}
        for step in steps:
            if max_examples is not None and examples >= max_examples:
                break
            seen += 1
            if progress:
                progress(seen, total)
            own = notes.get(step.index, [])
            fixed = next((a.correction for a in reversed(own) if a.correction), None) if annotated_corrections else None
            if fixed is not None:
                messages = _prompt_messages(store, step)
                reply = annotated_reply(episode, [s.action for s in steps if s.index < step.index], fixed,
                                        step.self_score)
                if messages is None or reply is None:
                    corrections_refused += 1
                    drop(step, "a person's corrected action the game does not accept there (or a step "
                               "without a self-score to pair it with)"
                         if messages is not None else "no prompt (a human action typed without a proposal)")
                    continue
                if add(episode, step, "corrected", messages + [{"role": "assistant", "content": reply}]):
                    examples += 1
                    corrections_used += 1
                continue
            hit = [a.label for a in own if "any" in excluded_labels or a.label in excluded_labels]
            if hit:
                labelled_excluded += 1
                drop(step, f"labelled {hit[0]} (excluded)")
                continue
            messages = _prompt_messages(store, step)
            positive = (step.actor == "model" and bool(step.reply.strip()) and
                        (threshold is None or (step.self_score is not None and step.self_score > threshold)))
            if messages is None:
                drop(step, "no prompt (a human action typed without a proposal)")
                continue
            if positive:
                if add(episode, step, "kept", messages + [{"role": "assistant", "content": step.reply}]):
                    examples += 1
                continue
            if correction is None:
                drop(step, "self-score at or below the threshold" if step.actor == "model"
                     else "not the model's own action")
                continue
            before = [s.action for s in steps if s.index < step.index]
            reply = (reference_reply(episode, before) if correction == REFERENCE
                     else await model_reply(correction, episode, before, messages))
            if reply is None:
                drop(step, "no usable correction")
                continue
            if add(episode, step, "corrected", messages + [{"role": "assistant", "content": reply}]):
                examples += 1
    rule = {"source": "exploration steps",
            "select": "every reply of the model" if threshold is None else "self_score > threshold",
            "threshold": threshold, "correction": correction, "max_examples": max_examples,
            "episodes": len(pairs), "excluded_eval_steps": excluded, "dropped_reasons": reasons,
            "measured": measure is not None, "max_length": max_length, "longest": longest,
            "too_long": len(too_long), "format": "chat prompt/completion (OpenAI messages export too)",
            "exclude_labels": list(excluded_labels), "labelled_excluded": labelled_excluded,
            "annotated_corrections": annotated_corrections, "human_corrections": corrections_used,
            "human_corrections_refused": corrections_refused}
    dataset = store.datasets.add_dataset(run.id, rule, rows)
    return DatasetBuild(dataset, selection_quality(store, dataset.id), excluded, tuple(too_long), longest,
                        max_length, AnnotationUse(excluded_labels, labelled_excluded, corrections_used,
                                                  corrections_refused))


def selection_quality(store, dataset_id: str) -> SelectionQuality:
    """Precision and recall of the kept (self-judged) rows against the verifier reward r > 0."""
    rows = store.datasets.dataset_rows(dataset_id)
    rewards: dict[tuple[str, int], float] = {}
    for episode_id in {r.episode_id for r in rows}:
        for step in store.episodes.steps(episode_id, include_prompt=False):
            rewards[(episode_id, step.index)] = step.reward
    positive = {key for key, r in rewards.items() if r > 0}
    kept = [r for r in rows if r.kind == "kept"]
    kept_pos = sum(1 for r in kept if (r.episode_id, r.step_index) in positive)
    positives = sum(1 for r in rows if (r.episode_id, r.step_index) in positive)
    return SelectionQuality(
        steps=len(rows), kept=len(kept), corrected=sum(r.kind == "corrected" for r in rows),
        dropped=sum(r.kind == "dropped" for r in rows), kept_positive=kept_pos, positives=positives,
        precision=kept_pos / len(kept) if kept else None,
        recall=kept_pos / positives if positives else None)


# ----- export ------------------------------------------------------------------------------------
def training_examples(store, dataset_id: str) -> list[dict[str, list[dict[str, Any]]]]:
    """Kept and corrected rows as conversational prompt/completion examples (evaluation rows refused)."""
    return [example for _, example in _examples_with_ids(store, dataset_id)]


def _examples_with_ids(store, dataset_id: str) -> list[tuple[tuple[str, int], dict[str, list[dict[str, Any]]]]]:
    """((episode id, step index), example) of every kept and corrected row, in the dataset's order."""
    rows = [r for r in store.datasets.dataset_rows(dataset_id) if r.kind in ("kept", "corrected")]
    for episode_id in {r.episode_id for r in rows}:
        episode = store.episodes.get_episode(episode_id)
        if is_eval_episode(episode):
            raise LeakageError(f"dataset {dataset_id!r} holds a row from evaluation episode {episode_id!r}")
    examples = []
    for row in rows:
        messages = [dict(m) for m in row.messages]
        if len(messages) < 2 or messages[-1].get("role") != "assistant":
            raise StoreError(f"dataset {dataset_id!r}: row {row.episode_id}#{row.step_index} has no reply")
        examples.append(((row.episode_id, row.step_index), {"prompt": messages[:-1], "completion": messages[-1:]}))
    return examples


def export_jsonl(store, dataset_id: str, directory: Path) -> Exported:
    """Write the dataset twice: `<id>.prompt_completion.jsonl` for TRL (loss on the reply only; each
    line also names its `episode_id` and `step`, joining it back to the store) and `<id>.messages.jsonl`
    for OpenAI-style fine-tuning (`{"messages": [...]}` and nothing else, as OpenAI's format asks;
    line i of both files is the same example)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    examples = _examples_with_ids(store, dataset_id)
    pc_path = directory / f"{dataset_id}.prompt_completion.jsonl"
    msg_path = directory / f"{dataset_id}.messages.jsonl"
    with open(pc_path, "w", encoding="utf-8") as pc, open(msg_path, "w", encoding="utf-8") as msg:
        for (episode_id, step), example in examples:
            # the step it came from (steps.episode_id, steps.index): TRL keeps only prompt and completion
            pc.write(json.dumps({**example, "episode_id": episode_id, "step": step}, ensure_ascii=False) + "\n")
            msg.write(json.dumps({"messages": example["prompt"] + example["completion"]}, ensure_ascii=False) + "\n")
    return Exported(pc_path, msg_path, len(examples))
