"""Inspect eval log export of a run (`s3gym export --format inspect`): a `.eval` file that `inspect view`
opens, built with Inspect's own types and written by its own writer (inspect_ai.log). Only `.eval`: the
viewer lists a `.json` log only under Inspect's own file names (timestamp_task_id.json), and
`inspect log convert` makes one from the `.eval` file when wanted.

One sample per episode, exploration and evaluation alike (the phase, checkpoint x and index in its
metadata): its messages are, step by step, the prompt as sent (system and user messages, the Hint
Messages inside them) followed by the model's reply (a person's move: the action, source "operator");
its score `verifier` is the episode's verifier score, with the self-judged scores per step, their sum
and the verifier's step rewards as the score's metadata. The run's config (model arguments as stored,
api bases without credentials) is the eval's task args; its model is the eval's model. Secret values
are redacted from every string of the log before it is written; the file is written whole under a
temporary name and renamed."""

from __future__ import annotations

import json
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.engine.decoding import storable_args
from s3gym_tui.models import Episode, Run, Step
from s3gym_tui.output import OutputError, atomic_path, check_target
from s3gym_tui.secrets import redact_values, secret_values, strip_url_credentials
from s3gym_tui.store.errors import StoreError

SUFFIX = ".eval"  # Inspect's log format (a zip: a header, then one JSON member per sample)
SCORER = "verifier"


def check_inspect() -> None:
    """OutputError (one line) when Inspect's library is not installed."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise OutputError("--format inspect needs inspect_ai: pip install 's3gym[inspect]' (nothing was "
                          "written)") from None


def check_log_path(path: Path, db_path: Optional[Path]) -> Path:
    """The output file, or OutputError when it does not end in .eval (or check_target refuses it)."""
    path = check_target(Path(path), db_path)
    if path.suffix != SUFFIX:
        raise OutputError(f"{path.name}: an Inspect log is a .eval file: name it RUN.eval (nothing was written)")
    return path


def export_inspect(store, run: Run, path: Path) -> int:
    """Write the run as an Inspect eval log at `path` (a .eval file) from one consistent read
    snapshot; returns the number of samples (episodes) written."""
    path = check_log_path(path, store.path)
    check_inspect()
    with store.snapshot("export a run"):
        log = eval_log(store, store.runs.get_run(run.id))
    _write(log, path)
    return len(log.samples or [])


def eval_log(store, run: Run):
    """The run as an inspect_ai.log.EvalLog (samples included), secret values redacted."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalSpec, EvalStats

    episodes = sorted(store.episodes.list(run.id), key=lambda e: (e.phase, e.checkpoint or 0, e.index))
    secrets = secret_values()
    samples = [_redacted(_sample(store, run, episode), secrets) for episode in episodes]  # one at a time
    config = run.config.model_dump(mode="json")
    config["model_args"] = storable_args(run.config.model_args)
    config["api_base"] = strip_url_credentials(run.config.api_base)
    config["api_bases"] = [strip_url_credentials(b) for b in run.config.api_bases]
    finished = [e.finished_at for e in episodes if e.finished_at]
    spec = EvalSpec(
        eval_id=run.id, run_id=run.id, task_id=run.id, created=run.created_at,
        task=f"s3gym/{run.config.game}", task_display_name=f"{run.config.game} ({run.config.pathway})",
        task_args=config, task_args_passed=config,
        dataset=EvalDataset(name=run.config.game, samples=len(samples), sample_ids=[s.id for s in samples]),
        model=run.config.model, model_args=config["model_args"], model_base_url=config["api_base"],
        config=EvalConfig(), packages=_packages(),
        metadata={"s3gym_run_id": run.id, "status": run.status, "status_reason": run.status_reason,
                  "note": run.note, "sweep_id": run.sweep_id})
    results = EvalResults(total_samples=len(samples),
                          completed_samples=sum(1 for e in episodes if e.status == "finished"),
                          scores=_eval_scores(episodes))
    header = _redacted(EvalLog(
        status="success" if run.status == "finished" else "started" if run.status in ("created", "running")
        else "cancelled" if run.status == "stopped" else "error",
        eval=spec, results=results,
        stats=EvalStats(started_at=run.created_at, completed_at=max(finished) if finished else "")), secrets)
    return header.model_copy(update={"samples": samples})


def _sample(store, run: Run, episode: Episode):
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage

    steps = store.episodes.steps(episode.id)
    messages: list = []
    first_prompt: Optional[list] = None
    for step in steps:
        prompt = _prompt_messages(store, step)
        if prompt and first_prompt is None:
            first_prompt = prompt
        messages += prompt
        human = step.actor != "model"
        messages.append(ChatMessageAssistant(
            content=step.reply or step.action, model=None if human else episode.model,
            source="operator" if human else "generate",
            metadata={"step": step.index, "actor": step.actor, "action": step.action, "valid": step.valid,
                      "self_score": step.self_score, "reward": step.reward, "feedback": step.feedback,
                      "proposed_action": step.proposed_action, "fault": step.fault}))
    model_steps = [s for s in steps if s.actor == "model"]
    usage = ModelUsage(input_tokens=sum(s.tokens_in for s in model_steps),
                       output_tokens=sum(s.tokens_out for s in model_steps),
                       total_tokens=sum(s.tokens_in + s.tokens_out for s in model_steps),
                       total_cost=_total([s.cost for s in model_steps]))
    last_reply = next((s.reply for s in reversed(model_steps) if s.reply), "")
    return EvalSample(
        id=episode.id, epoch=1, input=first_prompt or (steps[0].observation if steps else ""), target="",
        messages=messages, output=ModelOutput.from_content(episode.model, last_reply),
        scores=_scores(episode, steps), metadata=_episode_metadata(episode),
        model_usage={episode.model: usage} if model_steps else {},
        started_at=episode.started_at, completed_at=episode.finished_at,
        total_time=_seconds(episode.started_at, episode.finished_at),
        error=None if episode.status != "failed" else _error(f"the episode failed after {len(steps)} steps"))


def _prompt_messages(store, step: Step) -> list:
    """The step's prompt as sent (shared parts and deltas expanded) as Inspect chat messages; [] for a
    person's move (no model was asked)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

    if not step.prompt:
        return []
    try:
        sent = json.loads(store.prompts.prompt_of(step))
    except ValueError as err:
        raise StoreError(f"the stored prompt of step {step.index} of episode {step.episode_id!r} is not "
                         f"JSON; nothing was exported") from err
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant,
             "tool": ChatMessageTool}
    return [kinds.get(m.get("role"), ChatMessageUser)(content=m.get("content") or "", source="input",
                                                       metadata={"step": step.index})
            for m in sent]


def _scores(episode: Episode, steps: list[Step]) -> Optional[dict]:
    """{"verifier": the episode's verifier score} with the self-judged scores as metadata; None when the
    episode has no score (it did not finish)."""
    from inspect_ai.scorer import Score

    if episode.score is None:
        return None
    model_steps = [s for s in steps if s.actor == "model"]
    stated = [s.self_score for s in model_steps if s.self_score is not None]
    return {SCORER: Score(
        value=episode.score, answer=steps[-1].action if steps else None,
        explanation=f"verifier score of {episode.phase} episode {episode.index} (seed {episode.seed})",
        metadata={"self_scores": [s.self_score for s in steps],  # one per step: None = not stated
                  "self_score_sum": sum(stated) if stated else None,  # over the steps that stated one
                  "self_scores_missing": len(model_steps) - len(stated),
                  "rewards": [s.reward for s in steps], "reward_sum": sum(s.reward for s in steps)})}


def _eval_scores(episodes: list[Episode]) -> list:
    """The verifier's mean score over the evaluation episodes and over the exploration episodes, each
    left out when no episode of that phase has a score (never 0)."""
    from inspect_ai.log import EvalMetric, EvalScore

    metrics = {}
    for phase, name in (("eval", "eval_mean"), ("explore", "explore_mean")):
        scores = [e.score for e in episodes if e.phase == phase and e.score is not None]
        if scores:
            metrics[name] = EvalMetric(name=name, value=sum(scores) / len(scores))
    scored = sum(1 for e in episodes if e.score is not None)
    return [EvalScore(name=SCORER, scorer=SCORER, scored_samples=scored, unscored_samples=len(episodes) - scored,
                      metrics=metrics)] if metrics else []


def _episode_metadata(episode: Episode) -> dict[str, Any]:
    return {"phase": episode.phase, "checkpoint": episode.checkpoint, "index": episode.index,
            "seed": episode.seed, "game": episode.game, "mode": episode.mode, "pathway": episode.pathway,
            "status": episode.status, "n_steps": episode.n_steps, "summary_id": episode.summary_id,
            "history_episode_ids": list(episode.history_episode_ids), "history_cut": episode.history_cut,
            "fork_of": episode.fork_of, "fork_step": episode.fork_step}


def _total(values: list[Optional[float]]) -> Optional[float]:
    """The sum, or None when a value is unknown (an unknown price is not 0)."""
    return None if not values or any(v is None for v in values) else sum(values)


def _seconds(start: Optional[str], end: Optional[str]) -> Optional[float]:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _error(message: str):
    from inspect_ai._util.error import EvalError

    return EvalError(message=message, traceback="", traceback_ansi="")


def _packages() -> dict[str, str]:
    found = {}
    for name in ("s3gym", "inspect_ai"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _redacted(model, secrets: list[str]):
    """The Inspect object (a sample, the log's header) with every secret value redacted from every string
    in it, keys included (one pass over its JSON form, validated again as its own type)."""
    if not secrets:
        return model

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact_values(value, secrets)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        return value

    return type(model).model_validate(clean(model.model_dump(mode="json")))


def _write(log, path: Path) -> None:
    """Write the log with Inspect's writer to a temporary file beside `path`, then rename it."""
    from inspect_ai.log import write_eval_log

    with atomic_path(path, suffix=path.suffix) as tmp:
        write_eval_log(log, tmp, format="eval")
