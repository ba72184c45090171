"""What every table, view and column of the store means, as a Datasette metadata document
(`s3gym datasette-metadata`); the tests check that nothing stored goes undescribed."""

from __future__ import annotations

import sqlite3
from typing import Any

TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "meta": ("Store bookkeeping.", {"key": "setting name (schema_version)", "value": "its value"}),
    "sweeps": ("A sweep: games x pathways x models run together (`s3gym sweep`), resumable as a whole.", {
        "id": "sweep id (sweep-<hex>)", "config": "SweepConfig as JSON: games, pathways, models, shared run "
        "settings, api bases, concurrency, budget", "status": "created, running, finished, stopped or failed",
        "created_at": "UTC time of creation", "note": "why it stopped, if it did"}),
    "runs": ("A run of the protocol: (model, game, pathway, settings).", {
        "id": "run id (<game>-<pathway>-<hex>)", "config": "RunConfig as JSON (every setting of the run)",
        "game": "the game", "model": "litellm model string", "pathway": "none, history, summary or trained",
        "status": "created, running, finished, failed or stopped", "created_at": "UTC time of creation",
        "note": "free text", "sweep_id": "the sweep that made it",
        "status_reason": "why it stopped or failed (Ctrl-C, SIGTERM, the model, the disk)"}),
    "episodes": ("One episode: exploration (feeds experience) or evaluation (held out, never experience).", {
        "id": "episode id (<run>-x<index> or <run>-c<x>-e<j>)", "run_id": "its run (empty: a standalone episode)",
        "game": "the game", "mode": "explore or eval (the game's rules)", "phase": "explore or eval (the protocol's "
        "role; equals mode in runs)", "seed": "instance seed (evaluation seeds are >= 1,000,000)",
        "index": "exploration index, or evaluation index within its checkpoint",
        "checkpoint": "x (exploration episodes done) for evaluation episodes", "model": "litellm model string",
        "pathway": "the pathway it was played with", "status": "running, finished, failed or stopped",
        "score": "verifier score y (benchmark side)", "n_steps": "steps stored",
        "summary_id": "the summary version the agent saw", "history_episode_ids": "JSON list of the previous "
        "episodes fed as History ICL (see the history_sources view)", "history_cut": "how many oldest previous "
        "episodes the history budget dropped", "fork_of": "the episode this one was forked from",
        "fork_step": "source steps replayed before the fork",
        "experience_run_id": "the run whose exploration episodes it may see (empty: none, or stored before v7)",
        "experience_x": "the experience state it stood at: that run's exploration episodes 0..x-1",
        "experience_source": "who decided what it sees: state (a run's own episode), source (a fork as its "
        "source), chosen (a person's choice: a borrow, a summary trial), none", "started_at": "UTC start",
        "finished_at": "UTC end"}),
    "steps": ("One step: what the agent saw, its reply, action and self-score, and the verifier's reward.", {
        "id": "step id (insertion order)", "episode_id": "its episode", "index": "step number in the episode",
        "action": "the action executed", "self_score": "the agent's self-judged score s (empty: missing in the "
        "reply)", "reward": "verifier reward r (never shown to the agent in the main setting)",
        "valid": "1 if the game accepted the action", "terminated": "1 if the game ended here",
        "truncated": "1 if the step cap ended the episode here", "actor": "model, human or human-edit",
        "proposed_action": "the model's action when a person replaced it", "fault": "what went wrong with the "
        "model call or the reply (retries, a missing or malformed score, ...)", "tokens_in": "prompt tokens",
        "tokens_out": "completion tokens", "latency_ms": "model call time", "cost": "dollars (empty: litellm "
        "knows no price)", "created_at": "UTC time", "feedback": "the game's feedback line",
        "observation": "the observation before the action", "reply": "the raw model reply",
        "prompt": "the prompt's parts (JSON: copies of the prompt of step `base`, text as sent, shared parts "
                  "in texts); the view step_prompts shows the messages as sent; empty: no prompt",
        "tokens_cached": "prompt tokens the provider read from its prompt cache (part of tokens_in; empty: it "
                         "did not say)",
        "tokens_cache_write": "prompt tokens the provider wrote to its prompt cache (Claude; empty: not said)"}),
    "summaries": ("Versioned Summary Memory of a run: model-written or human-edited, vetoable, pinnable.", {
        "id": "summary id", "run_id": "its run", "game": "the game", "version": "1, 2, ... within the run",
        "retain": "strategies to retain", "avoid": "mistakes to avoid", "next": "directions for the next episode",
        "source_episode_ids": "JSON list of the exploration episodes it was built from (see summary_sources)",
        "status": "active or vetoed", "pinned": "1 if pinned (no new summaries until unpinned)",
        "author": "model:<name> or human:<user>", "parent_version": "the version a human edit started from",
        "created_at": "UTC time", "for_episode_id": "the exploration episode whose step 0 it was written for",
        "tokens_in": "prompt tokens of its model call", "tokens_out": "completion tokens of its model call",
        "cost": "dollars of its model call (empty: unknown price)"}),
    "checkpoints": ("An evaluation checkpoint: the eval episodes at x and their verifier scores.", {
        "run_id": "its run", "x": "exploration episodes done", "episode_ids": "JSON list of its eval episodes "
        "(see checkpoint_episodes)", "scores": "JSON list of their scores (the mean is the curve's y)"}),
    "datasets": ("A training set built from a run's exploration steps.", {
        "id": "dataset id", "run_id": "its run", "rule": "selection rule as JSON (threshold, correction)",
        "created_at": "UTC time", "counts": "rows per kind as JSON"}),
    "dataset_rows": ("One exploration step as a training example.", {
        "dataset_id": "its dataset", "episode_id": "the step's episode", "step_index": "the step's index",
        "kind": "kept, corrected or dropped", "messages": "chat messages as JSON (empty list if dropped)",
        "reason": "why it was dropped (too long for the training window, below the threshold, ...)",
        "tokens": "prompt + reply tokens with the training tokenizer, when measured"}),
    "leases": ("The one process driving a run (resume only when it is gone).", {
        "run_id": "the driven run", "token": "the lease's identity", "pid": "the driving process",
        "host": "its host", "command": "what it runs (s3gym run, resume, sweep, the app)",
        "acquired_at": "UTC time it took the run", "heartbeat_at": "last heartbeat (seconds since the epoch)"}),
    "experience_states": ("Experience state x of a run: the summary it was built from and the one it uses.", {
        "run_id": "the run", "x": "exploration episodes done", "base_summary_id": "the version current "
        "when x began", "summary_id": "the version x uses (the pinned base, or the one the model wrote for x)",
        "began_at": "UTC time x began"}),
    "summary_actions": ("Curation log: every edit, veto, unveto, pin and unpin of a summary.", {
        "id": "log entry", "run_id": "the run", "summary_id": "the version acted on (an edit: the new one)",
        "action": "edit, veto, unveto, pin or unpin", "author": "who: human:<name> (older rows: human)",
        "created_at": "UTC time",
        "effective_from_x": "the first experience state that sees it"}),
    "trainings": ("A training: an SFT or GRPO expert, or a distillation student (phase 1 off-policy, "
                  "phase 2 on-policy); its evaluation runs are ordinary trained-pathway runs.", {
        "id": "training id", "method": "sft, grpo, distill-off or distill-on", "role": "expert; phase1 or phase2 (the two-phase student); off-only, on-only or mixed-sft (its ablations)",
        "games": "JSON list of its games", "source_run": "the exploring run it learnt from (experts)",
        "dataset_id": "its SFT dataset", "study_id": "the distillation study it belongs to",
        "parent_id": "the training it continues (phase 2: its phase 1 student)", "backend": "local or remote",
        "base": "the base model (a local directory or the provider's model)", "reward": "GRPO reward source: "
        "self (the self-judged score, default), stated, or oracle (an ablation)", "directory": "adapters, JSONL, manifest",
        "status": "created, training, evaluating, finished, interrupted or failed", "examples": "examples used",
        "epochs": "epochs done", "steps": "optimizer steps done", "train_seconds": "wall time of training",
        "settings": "JSON: learning rate, LoRA rank, batch size, max length, ...", "metrics": "JSON: peak RSS, "
        "examples/s, tokens/s, dropped or cut examples", "remote_job": "the provider's fine-tuning job",
        "error": "why it failed", "created_at": "UTC time", "finished_at": "UTC end"}),
    "training_checkpoints": ("Checkpoint x of a training (x = 0: the base model) and the model string "
                             "that plays it.", {
        "training_id": "its training", "x": "epochs (or phase steps) done", "model": "model string "
        "(trained/<id>/<x>)", "adapter": "the LoRA adapter directory", "step": "optimizer steps when saved",
        "repaired": "written by s3gym before v8 only: replies repaired in its evaluation (mixed into its figures); "
                    "since v8 repairs are rows of step_repairs, in a repair evaluation run of their own"}),
    "step_repairs": ("A reply the trained-model provider repaired (asked for with --repair: a run whose model ends "
                     "in /repair): the model's own reply and the repaired one the game acted on.", {
        "episode_id": "the step's episode", "index": "the step number", "original_reply": "the reply as the "
        "model wrote it", "repaired_reply": "the reply regenerated under the game's answer grammar (the step's reply)"}),
    "training_leases": ("The one process driving a training (its trainer and evaluation): a training whose "
                        "status says training or evaluating with no live lease was killed (shown as interrupted).", {
        "training_id": "the driven training", "token": "the lease's identity", "pid": "the driving process",
        "host": "its host", "command": "what it runs (s3gym train, resume, distill)",
        "acquired_at": "UTC time it took the training", "heartbeat_at": "last heartbeat (seconds since the epoch)"}),
    "training_losses": ("The loss curve of a training, per logged optimizer step.", {
        "training_id": "its training", "phase": "sft, grpo, distill-off or distill-on", "step": "optimizer step",
        "epoch": "epoch (fractional)", "loss": "training loss", "metrics": "JSON: e.g. GRPO reward, KL; the learning signal "
        "(frac_reward_zero_std: share of groups with zero reward variance, reward_std, parsed_replies, grad_norm, "
        "kl) and no_signal (1: the update had none)"}),
    "training_evals": ("The evaluation runs of a training, one per game.", {
        "training_id": "its training", "game": "the game", "run_id": "the trained-pathway run",
        "xs": "JSON list of the checkpoints evaluated"}),
    "training_sources": ("What a training learnt from (exploration data only, never evaluation).", {
        "training_id": "its training", "kind": "dataset, rollout, prompt or teacher", "ref": "dataset id, "
        "episode id or teacher model string", "game": "the game", "seed": "an exploration seed",
        "mode": "explore (evaluation sources are refused)", "n": "how many"}),
    "studies": ("A distillation study: per-game experts consolidated into one multi-game student.", {
        "id": "study id", "games": "JSON list of its games", "experts": "JSON list of (game, training, model)",
        "settings": "JSON: phases, steps, ablations", "status": "created, training, evaluating, finished, "
        "interrupted or failed", "created_at": "UTC time"}),
    "annotations": ("A person's label and note on a step, an episode or a summary version (`s3gym annotate`, "
                    "the app's `m` key); searchable, exported, usable by `s3gym dataset`.", {
        "id": "annotation id", "kind": "step, episode or summary", "episode_id": "the episode (of the step)",
        "step_index": "the step's index (steps only)", "summary_id": "the summary version (summaries only)",
        "label": "mistake, lucky, insight, leak?, format, or a label of the config's `labels`",
        "note": "free text", "correction": "the action the step should have taken (steps only; "
        "`s3gym dataset --corrections` trains on it)", "author": "human:<name>", "created_at": "UTC time"}),
    "search_steps": ("Full-text index (FTS5) of the steps' action, reply, feedback and observation: Datasette's "
                     "search box on steps uses it. Only the index: the text stays in steps.", {
        "action": "the action executed", "reply": "the raw model reply", "feedback": "the game's feedback line",
        "observation": "the observation before the action"}),
    "search_summaries": ("Full-text index (FTS5) of the summary versions (see the summary_search view).", {
        "summary_id": "the summary version", "retain": "strategies to retain", "avoid": "mistakes to avoid",
        "next": "directions for the next episode"}),
    "search_notes": ("Full-text index (FTS5) of annotation labels and notes.", {
        "label": "the annotation's label", "note": "its note"}),
    "search_pending": ("Steps stored but not yet in the search index: queued by their insert trigger, indexed "
                       "when their episode ends or before a search (by any writable s3gym).", {
        "id": "the step's id"}),
    "pi_extractions": ("TASPO privileged information: one analyzer call over a sibling group (episodes of one game, "
                       "mode and seed) reading its successful trajectories (`s3gym credit`).", {
        "id": "extraction id", "game": "the game", "mode": "explore or eval (training reads explore only)",
        "seed": "the group's seed", "episode_ids": "JSON list of the sibling episodes read",
        "successful_ids": "JSON list of those judged successful", "success_rule": "how success was judged (self: "
        "the agent's own scores; oracle: the verifier, an ablation)", "purpose": "view (a person's reading) or "
        "training", "source": "where the siblings came from (on-trajectory group or the off-trajectory ablation)",
        "analyzer": "the litellm model that wrote the items", "created_at": "UTC time",
        "prompt": "the analyzer's prompt, as sent", "reply": "its raw reply"}),
    "pi_items": ("One PI item e = (g, c, Z): a requirement and the condition under which it applies.", {
        "id": "item id", "extraction_id": "its extraction", "position": "its order in the reply",
        "requirement": "g: a task requirement, ordering or progress rule", "condition": "c: when it applies",
        "cues": "JSON list of words matched against a trajectory's pre-action history"}),
    "pi_evidence": ("Z: the steps of successful siblings that support a PI item.", {
        "item_id": "the item", "episode_id": "the sibling episode", "step_index": "its step"}),
    "episode_credits": ("Computed TASPO credit of one episode: its outcome advantage and the settings used.", {
        "id": "credit id", "episode_id": "the episode", "extraction_id": "the PI it aligned (empty: none)",
        "advantage": "A_i = (R_i - group mean) / (group std + delta) (empty: undefined)",
        "reward": "R_i, the outcome as judged by the success rule", "group_ids": "JSON list of the sibling group",
        "analyzer": "the analyzer model", "scorer": "the model whose log-probabilities gave the shifts",
        "credit": "uniform, token or action (aggregation)", "kappa": "shift filter threshold",
        "tau": "tanh temperature", "eps_w": "weight half-range", "training_id": "the training that used it",
        "note": "why something is undefined, if it is", "created_at": "UTC time"}),
    "action_credits": ("Per action of a credited episode: its weight w (1 = uniform credit) and shift.", {
        "credit_id": "the episode credit", "step_index": "the step", "weight": "w_it in [1-eps_w, 1+eps_w]",
        "shift": "d_it: mean filtered log-probability shift with PI (empty: no aligned PI)",
        "item_ids": "JSON list of the PI items aligned with this action"}),
    "aspire_runs": ("ASPIRE: one agent's self-directed attempt at a vague goal under a protocol and a budget "
                    "(`s3gym aspire`); the hidden suite is not stored.", {
        "id": "ASPIRE run id", "goal_id": "the goal of the goal set", "goal_text": "the goal as the agent read it",
        "explicit": "1: the explicit-goal control (suite's games and metric named)", "control_of": "the vague run "
        "this control measures", "model": "the agent's litellm model", "operator": "model or scripted",
        "protocol": "final (no score before the end) or adaptive (a few aggregate scores, score-gated retention)",
        "budget": "JSON: model calls, tokens, dollars, wall time", "usage": "JSON: what was spent",
        "settings": "JSON: other settings", "status": "created, running, finished, interrupted or failed",
        "status_reason": "why it stopped", "base_candidate_id": "the starting candidate",
        "final_candidate_id": "what the agent submitted", "retained_candidate_id": "what retention kept (adaptive)",
        "created_at": "UTC time", "finished_at": "UTC end",
        "suite": "drawn (its hidden suite's seeds drawn from the store's secret) or fixed (stored before schema 15: "
                 "the seeds named in the source)"}),
    "aspire_suite_secret": ("The store's secret that the hidden suites of its ASPIRE runs draw their seeds from "
                            "(made once, with the store or its upgrade to schema 15; no agent's tool reads it).", {
        "id": "1 (one row)", "secret": "random, 64 hex digits"}),
    "aspire_decisions": ("Every tool call of an ASPIRE run, in order, with what it cost.", {
        "aspire_run_id": "the ASPIRE run", "idx": "order", "tool": "look, practise, update, validate, evaluate, "
        "submit, or the unknown name called", "arguments": "JSON arguments as given", "result": "what the agent "
        "was told", "outcome": "ok, error, over_budget or refused", "category": "compute split: goal, practice, "
        "update, validation", "reply": "the model's raw reply", "calls": "model calls", "tokens_in": "prompt tokens",
        "tokens_out": "completion tokens", "cost": "dollars (empty: unknown)", "seconds": "wall time",
        "created_at": "UTC time", "fault": "what was cut of its reply, arguments or result (empty: nothing)"}),
    "aspire_candidates": ("A candidate of an ASPIRE run, with its lineage and what freezes it.", {
        "id": "candidate id", "aspire_run_id": "the ASPIRE run", "parent_id": "the candidate it was made from",
        "kind": "base, memory, sft or grpo", "model": "the model it plays as", "game": "its game (memories)",
        "summary_id": "its summary memory", "training_id": "its training", "frozen_ref": "the adapter or model "
        "reference evaluated", "status": "active, retained or rolled_back", "note": "why",
        "decision_idx": "the decision that made it", "created_at": "UTC time"}),
    "aspire_claims": ("What the agent claimed on submit.", {
        "aspire_run_id": "the ASPIRE run", "candidate_id": "the submitted candidate", "text": "the claim",
        "claimed_delta": "the improvement it claimed (empty: none given)", "decision_idx": "the submit call",
        "created_at": "UTC time"}),
    "aspire_scores": ("Hidden scores (controller side only): per candidate and purpose.", {
        "aspire_run_id": "the ASPIRE run", "candidate_id": "the candidate", "purpose": "base, request, final or "
        "retained", "score": "weighted aggregate over the hidden suite (empty: undefined)", "per_game": "JSON: "
        "per game", "episodes": "evaluation episodes behind it", "run_ids": "JSON list of the evaluation runs",
        "created_at": "UTC time"}),
    "aspire_leases": ("The one process driving an ASPIRE run: a run whose status says running with no live "
                      "lease was killed (shown as interrupted).", {
        "aspire_id": "the driven ASPIRE run", "token": "the lease's identity", "pid": "the driving process",
        "host": "its host", "command": "what it runs (s3gym aspire, resume)",
        "acquired_at": "UTC time it took the run", "heartbeat_at": "last heartbeat (seconds since the epoch)"}),
    "aspire_run_links": ("The ordinary s3gym runs an ASPIRE run made.", {
        "aspire_run_id": "the ASPIRE run", "run_id": "the run", "role": "practice, validation, hidden (the controller's strict evaluation), "
        "training (run_id is a training id) or memory (holds the summaries the agent wrote)",
        "candidate_id": "the candidate it played"}),
    "texts": ("Large prompt parts shared by many steps, stored once.", {
        "key": 'content hash, referenced as {"text": key} in steps.prompt', "text": "the part as it appears in "
        "the prompt"}),
}

VIEWS: dict[str, tuple[str, dict[str, str]]] = {
    "step_prompts": ("Each step's prompt exactly as sent (the messages JSON), joined from its stored parts.", {
        "prompt": "the messages as sent (JSON)"}),
    "steps_in_runs": ("Every step with its run, sweep, game, model, pathway and phase (no prompt text).", {}),
    "run_overview": ("Per run: finished episodes and checkpoints, steps, tokens and step cost.", {}),
    "history_sources": ("The History ICL sources of each episode, one row per source (from the JSON list).", {}),
    "summary_sources": ("The source episodes of each summary version, one row per source.", {}),
    "checkpoint_episodes": ("The evaluation episodes of each checkpoint with their scores.", {}),
    "summary_search": ("Summary versions with their full-text index row: Datasette's search box works here.", {
        "search_rowid": "the row of search_summaries"}),
}
FTS: dict[str, tuple[str, str]] = {"steps": ("search_steps", "id"), "summary_search": ("search_summaries",
                                                                                       "search_rowid")}
_SHADOW = ("_data", "_idx", "_docsize", "_config", "_content")

LABELS = {"annotations": "label", "runs": "id", "episodes": "id", "sweeps": "id", "summaries": "id", "datasets": "id",
          "trainings": "id", "studies": "id"}


def datasette_metadata(conn: sqlite3.Connection, database: str) -> dict[str, Any]:
    """The metadata document for Datasette (`datasette FILE --metadata metadata.json`), for the
    tables and views present in the store; `database` is the file's stem (Datasette's name)."""
    present = {r[0]: r[1] for r in conn.execute("SELECT name, type FROM sqlite_master "
                                                 "WHERE type IN ('table', 'view')")}
    tables: dict[str, Any] = {}
    for name, (description, columns) in {**TABLES, **VIEWS}.items():
        if name not in present:
            continue
        entry: dict[str, Any] = {"description": description}
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
        described = {c: columns.get(c) or _from_tables(name, c) for c in cols}
        entry["columns"] = {c: d for c, d in described.items() if d}
        if name in LABELS:
            entry["label_column"] = LABELS[name]
        if name == "steps":
            entry["sort"] = "id"
        if name in FTS and FTS[name][0] in present:
            entry["fts_table"], entry["fts_pk"] = FTS[name]
        if name == "aspire_suite_secret":  # not in Datasette's table lists (hidden suites stay hidden)
            entry["hidden"] = True
        tables[name] = entry
    for name in present:  # FTS5's own storage tables: hidden, described as such
        owner = next((t for t in TABLES if t.startswith("search_") and name.startswith(t)
                      and name[len(t):] in _SHADOW), None)
        if owner is None:
            continue
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
        tables[name] = {"description": f"FTS5's internal storage of {owner} (not for reading).", "hidden": True,
                        "columns": {c: f"internal to {owner}" for c in cols}}
    return {
        "title": "s3gym store",
        "description": "Runs, episodes, steps, versioned summaries, checkpoints and training sets of s3gym "
                       "(S3Gym, arXiv 2608.31100). Self-scores s are the agent's; rewards r and scores y the "
                       "verifier's. Evaluation episodes are held out: never history, summaries or training.",
        "databases": {database: {"tables": tables}},
    }


_VIEW_SOURCES = {"step_id": ("steps", "id"), "step_index": ("steps", "index"), "episode_index": ("episodes", "index"),
                 "source_episode_id": (None, "an exploration episode id"), "position": (None, "place in the JSON list"),
                 "summary_id": ("episodes", "summary_id"), "explore_done": (None, "finished exploration episodes"),
                 "eval_done": (None, "finished evaluation episodes"), "checkpoints_done": (None, "checkpoints stored"),
                 "steps": (None, "steps stored"), "step_cost": (None, "dollars of its steps (known prices)"),
                 "score": (None, "the episode's verifier score at the checkpoint")}


def _from_tables(view: str, column: str) -> str | None:
    """A view column's description: the table column it shows (steps first, then episodes, runs)."""
    if column in _VIEW_SOURCES:
        table, text = _VIEW_SOURCES[column]
        return TABLES[table][1].get(text) if table else text
    for table in ("steps", "episodes", "runs", "checkpoints", "summaries"):
        if column in TABLES[table][1]:
            return TABLES[table][1][column]
    return None
