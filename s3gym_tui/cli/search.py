"""`s3gym search` (words and filters over every stored step, summary and note), `s3gym annotate`
(a label and a note on a step, an episode or a summary version) and `s3gym annotations`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.text import Text

from s3gym_tui.cli.common import (DbOption, JsonOption, ProgressOption, Stopped, UserError, _fmt, _store, check_number,
                                  cli, console, emit_json, err)
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe, safe_markup

_MANY = dict(show_default=False)
PROGRESS_FROM = 5_000  # steps waiting to be indexed from which indexing them shows progress


def index_backlog(store, progress_mode: Optional[ProgressMode] = None) -> None:
    """Index the steps stored before the index existed, with progress on stderr (stdout stays the
    results); Ctrl-C keeps what was indexed and the next search goes on."""
    from s3gym_tui.progress import JobProgress

    total = store.search.search_backlog()
    if total < PROGRESS_FROM or store.read_only:
        return  # a few: the search indexes them itself
    with JobProgress(err, progress_mode) as progress:
        progress.note(f"indexing {total:,} older steps for search (once; Ctrl-C keeps what is done)")
        task = progress.add_task("indexing steps", total=total)
        store.search.index_backlog(lambda done, _total: progress.update(task, completed=done))


def search_filters(**given):
    """The CLI's options as SearchFilters (a bad value names its flag)."""
    from pydantic import ValidationError

    from s3gym_tui.store.search import SearchFilters

    names = {"games": "--game", "runs": "--run", "sweeps": "--sweep", "models": "--model", "pathways": "--pathway",
             "phases": "--phase", "verdicts": "--verdict", "faults": "--fault", "actors": "--actor",
             "labels": "--label", "fields": "--in", "self_min": "--self-min", "self_max": "--self-max",
             "reward_min": "--reward-min", "reward_max": "--reward-max"}
    try:
        return SearchFilters(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first.get("loc", ()) if not isinstance(p, int)]
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        for name, flag in names.items():  # the flags the person typed, not the fields' names
            message = message.replace(name, flag)
        raise UserError(f"{names.get(loc[0], loc[0])}: {message}" if loc else message) from None


@cli.command()
def search(
    words: List[str] = typer.Argument(None, metavar="[WORDS]...", help='Words that must all appear; "a phrase"; '
                                      "word* (a prefix); -word (leave out; after --: search grudge -- -left). None: "
                                      "the filters alone."),
    game: List[str] = typer.Option(None, "--game", help="Only this game (repeat for several).", **_MANY),
    run: List[str] = typer.Option(None, "--run", help="Only this run.", **_MANY),
    sweep: List[str] = typer.Option(None, "--sweep", help="Only the runs of this sweep.", **_MANY),
    model: List[str] = typer.Option(None, "--model", help="Only this model string.", **_MANY),
    pathway: List[str] = typer.Option(None, "--pathway", help="none | history | summary | trained.", **_MANY),
    phase: List[str] = typer.Option(None, "--phase", help="explore | eval.", **_MANY),
    verdict: List[str] = typer.Option(None, "--verdict", help="agree | over | under | missing (self-score "
                                      "against the verifier).", **_MANY),
    self_min: Optional[float] = typer.Option(None, "--self-min", help="Self-score s at least this."),
    self_max: Optional[float] = typer.Option(None, "--self-max", help="Self-score s at most this."),
    reward_min: Optional[float] = typer.Option(None, "--reward-min", help="Verifier reward r at least this."),
    reward_max: Optional[float] = typer.Option(None, "--reward-max", help="Verifier reward r at most this."),
    fault: List[str] = typer.Option(None, "--fault", help="any | none | words found in the step's fault "
                                    "(e.g. timeout, 'missing self-score').", **_MANY),
    actor: List[str] = typer.Option(None, "--actor", help="model | human | human-edit.", **_MANY),
    forks: Optional[bool] = typer.Option(None, "--forks/--no-forks", help="Only forked episodes' own steps / "
                                         "none of them.", show_default=False),
    divergences: bool = typer.Option(False, "--divergences", help="Only the first divergence of Compare pairs "
                                     "(History vs Summary evaluation pairs, forks and their sources)."),
    label: List[str] = typer.Option(None, "--label", help="Annotated with this label (the step or its episode; "
                                    "'any': any label).", **_MANY),
    field: List[str] = typer.Option(None, "--in", help="Look for the words only in: action, reply, feedback, "
                                    "observation, summary, note.", **_MANY),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many steps (and as many "
                              "summaries and episodes)."),
    as_json: bool = JsonOption,
    progress_mode: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Find steps, summary versions and annotated episodes by words and filters, newest first, grouped by
    episode (an older file is indexed once, with progress)."""
    from s3gym_tui.engine.finding import find
    from s3gym_tui.store.search import ACTORS, PHASES, VERDICTS

    for name, value in (("--self-min", self_min), ("--self-max", self_max), ("--reward-min", reward_min),
                        ("--reward-max", reward_max)):
        check_number(name, value)
    for flag, values, allowed in (("--verdict", verdict, VERDICTS), ("--actor", actor, ACTORS),
                                  ("--phase", phase, PHASES)):
        for value in values or ():
            if value not in allowed:
                raise UserError(f"{flag} {value}: one of {', '.join(allowed)}")
    filters = search_filters(games=game or [], runs=run or [], sweeps=sweep or [], models=model or [],
                             pathways=pathway or [], phases=phase or [], verdicts=verdict or [],
                             self_min=self_min, self_max=self_max, reward_min=reward_min, reward_max=reward_max,
                             faults=fault or [], actors=actor or [], forks=forks, divergences=divergences,
                             labels=label or [], fields=field or [])
    store = _store(db, write=True)
    index_backlog(store, progress_mode)
    result = find(store, " ".join(words or []), filters, limit=limit)
    if as_json:
        emit_json({"query": result.query, "filters": filters.model_dump(mode="json", exclude_defaults=True),
                   "hits": [{**h.model_dump(mode="json"), "target": h.target} for h in result.hits],
                   "more": result.more, "unindexed_steps": result.backlog, "incomplete": result.incomplete,
                   "unindexed_why": result.unindexed_why or None, "seconds": round(result.seconds, 4)})
    else:
        print_result(result)
    if result.incomplete:  # after the results: what was found is shown, and the exit code says it is not all
        raise Stopped(f"results are incomplete: {result.backlog:,} steps could not be indexed, so their words were "
                      f"not searched ({result.unindexed_why})")


def print_result(result) -> None:
    from s3gym_tui.highlight import highlighted

    terms = result.term_list()
    if not result.hits:
        console.print("no matches", highlight=False)
    steps = sum(h.kind == "step" for h in result.hits)
    for group, hits in result.groups():
        first = hits[0]
        head = Text()
        head.append(safe(group, one_line=True), style="bold")
        where = " · ".join(p for p in (first.game, first.model, first.pathway, first.phase or "") if p)
        head.append(f"  {safe(where, one_line=True)}", style="dim")
        console.print(head, soft_wrap=True, highlight=False)
        for hit in hits:
            line = Text("  ")
            line.append(safe(hit.target, one_line=True), style="cyan")
            if hit.kind == "step":
                line.append(f"  {safe(hit.action or '', one_line=True, max_chars=60)}", style="bold")
                line.append(f"  s={_fmt(hit.self_score)} r={_fmt(hit.reward)} {hit.verdict}")
                if hit.actor and hit.actor != "model":
                    line.append(f" ({hit.actor})", style="magenta")
            elif hit.kind == "summary":
                line.append(f"  version {hit.version}")
            if hit.labels:
                line.append("  [" + ", ".join(safe(lab, one_line=True) for lab in hit.labels) + "]", style="yellow")
            console.print(line, soft_wrap=True, highlight=False)
            for name, text in hit.lines:
                row = Text(f"      {name}: ", style="dim")
                row.append_text(highlighted(text, terms))
                console.print(row, soft_wrap=True, highlight=False)
    more = " (more: raise --limit or add filters)" if result.more else ""
    console.print(f"{steps} step{'s' * (steps != 1)}, {len(result.hits) - steps} other{'s' * (len(result.hits) - steps != 1)}"
                  f" in {result.seconds * 1000:.0f} ms{more}", style="dim", highlight=False)


@cli.command()
def annotate(
    target: Optional[str] = typer.Argument(None, help="EPISODE#INDEX (a step, from 0), EPISODE, or summary:ID."),
    label: Optional[str] = typer.Argument(None, help="mistake, lucky, insight, leak?, format, or one of the "
                                          "config's `labels`."),
    note: str = typer.Option("", "--note", "-n", help="Free text."),
    correct: Optional[str] = typer.Option(None, "--correct", help="The action the step should have taken "
                                          "(`s3gym dataset --corrections` trains on it)."),
    remove: Optional[int] = typer.Option(None, "--remove", help="Remove the annotation with this id instead."),
    as_json: bool = JsonOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Put a label (and a note) on a step, an episode or a summary version, as you (the config's human_name)."""
    from s3gym_tui.authors import human_author
    from s3gym_tui.config import load_settings
    from s3gym_tui.store.annotations import annotation_json, parse_target

    store = _store(db, write=True)
    if remove is not None:
        if target or label:
            raise UserError("--remove takes an annotation id alone (no TARGET or LABEL)")
        gone = store.annotations.remove_annotation(remove)
        if as_json:
            emit_json(annotation_json(gone))
        else:
            console.print(f"removed annotation {gone.id} ({safe_markup(gone.label)} on {safe_markup(gone.target)})",
                          soft_wrap=True, highlight=False)
        return
    if not target or not label:
        raise UserError("name what to annotate and the label: s3gym annotate EPISODE#INDEX mistake --note '...'")
    settings = load_settings()
    kind, episode_id, step_index, summary_id = parse_target(target)
    made = store.annotations.add_annotation(kind, label.strip(), author=human_author(settings.human_name), note=note,
                                            episode_id=episode_id, step_index=step_index, summary_id=summary_id,
                                            correction=correct, labels=settings.annotation_labels())
    if as_json:
        emit_json(annotation_json(made))
        return
    console.print(f"annotation {made.id}: {safe_markup(made.label)} on {safe_markup(made.target)} by "
                  f"{safe_markup(made.author)}", soft_wrap=True, highlight=False)


@cli.command("annotations")
def list_annotations(
    run: Optional[str] = typer.Option(None, "--run", help="On this run's episodes, steps and summaries."),
    episode: Optional[str] = typer.Option(None, "--episode", help="On this episode and its steps."),
    label: Optional[str] = typer.Option(None, "--label", help="Only this label."),
    as_json: bool = JsonOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Stored annotations, oldest first."""
    from s3gym_tui.store.annotations import annotation_json

    store = _store(db)
    found = store.annotations.list(run_id=run, episode_id=episode, label=label)
    if as_json:
        emit_json([annotation_json(a) for a in found])
        return
    if not found:
        console.print("no annotations", highlight=False)
    for a in found:
        line = Text(f"{a.id:>5}  ")
        line.append(safe(a.target, one_line=True), style="cyan")
        line.append(f"  {safe(a.label, one_line=True)}", style="yellow")
        if a.correction:
            line.append(f"  → {safe(a.correction, one_line=True, max_chars=60)}", style="bold")
        line.append(f"  {safe(a.author, one_line=True)} {a.created_at[:19]}", style="dim")
        if a.note:
            line.append(f"  {safe(a.note, one_line=True, max_chars=200)}")
        console.print(line, soft_wrap=True, highlight=False)
