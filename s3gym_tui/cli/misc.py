"""Commands that need no run: play (reference policy), models, games, tui (the app), migrate."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from s3gym_tui.cli.common import DbOption, JsonOption, cli, console, emit_json, model_name
from s3gym_tui.textgate import safe_markup


@cli.command()
def play(game: str = typer.Argument(...),
         mode: str = typer.Option("explore", "--mode", help="explore | eval (the seed must be of that mode)."),
         seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Default: the mode's first seed."),
         delay: float = typer.Option(0.0, "--delay", min=0.0, max=60.0, help="Seconds between steps.")) -> None:
    """Watch the game's reference policy play one episode in the terminal (no model, no store)."""
    import time

    import s3gym_games as games
    from s3gym_tui.cli.common import UserError
    from s3gym_tui.models import EVAL_SEED_BASE, phase_of_seed

    if mode not in ("explore", "eval"):
        raise UserError(f"unknown mode {mode!r}: explore or eval")
    if seed is None:
        seed = EVAL_SEED_BASE if mode == "eval" else 0
    if phase_of_seed(seed) != mode:
        raise UserError(f"seed {seed:,} is an {phase_of_seed(seed)} seed: {mode} episodes use seeds "
                        f"{'>= ' if mode == 'eval' else 'below '}{EVAL_SEED_BASE:,}")
    g = games.make(game, mode)
    g.reset(seed)
    policy = games.reference_policy(game)
    console.print(g.render())
    while not g.done:
        move = policy.act(g.view())
        result = g.step(move.action)
        console.rule(f"step {g.steps}: {move.action}  (self-score {move.expected_reward:g}, reward {result.reward:g})")
        console.print(safe_markup(result.feedback))
        console.print(g.render())
        if delay:
            time.sleep(delay)
    console.print(f"[bold]final score {g.score():g}[/]")


@cli.command()
def models(servers: bool = typer.Option(False, "--servers", help="Also look for model servers: the usual "
                                        "local ports (Ollama 11434, llama.cpp 8080, vLLM 8000, LM Studio "
                                        "1234) and those named in the config's `servers` or $S3GYM_SERVERS; "
                                        "list their models and the servers that listed none."),
           as_json: bool = JsonOption) -> None:
    """The built-in models (no key, no network); any litellm model string works too. With --servers,
    also the models servers list and the servers that are not answering."""
    from s3gym_tui.providers import BUILTIN_MODELS

    builtin = [{"model": name, "description": text} for name, text in BUILTIN_MODELS]
    scanned = _scan_servers() if servers else None
    if as_json:
        if scanned is None:
            emit_json(builtin)
        else:
            emit_json({"models": builtin, "found": [{"model": f.model, "api_base": f.api_base, "source": f.source,
                                                     "context": f.context} for f in scanned.found],
                       "not_answering": [{"server": s.where, "name": s.name, "why": s.why} for s in scanned.silent]})
        return
    table = Table(title="built-in models")
    table.add_column("model", no_wrap=True)
    table.add_column("what it is", overflow="fold")
    for name, description in BUILTIN_MODELS:
        table.add_row(name, description)
    console.print(table)
    if scanned is None:
        return
    found = Table(title="models on servers")
    found.add_column("model", overflow="fold")
    found.add_column("api base", no_wrap=True)
    found.add_column("server", overflow="fold")
    for f in scanned.found:
        found.add_row(safe_markup(f.model), safe_markup(f.api_base or ""), safe_markup(f.source))
    console.print(found if scanned.found else "no model server answered")
    for silent in scanned.silent:
        console.print(f"[yellow]not answering[/]: {safe_markup(silent.said())}", soft_wrap=True, highlight=False)


def _scan_servers():
    """engine.discovery.scan with the servers the person named (a bad name: one line)."""
    from s3gym_tui.cli.common import UserError
    from s3gym_tui.config import load_settings
    from s3gym_tui.engine.discovery import scan

    try:
        return scan(load_settings().servers)
    except ValueError as exc:
        raise UserError(str(exc)) from None


@cli.command("games")
def list_games() -> None:
    """The seven games."""
    import s3gym_games as games

    table = Table(title="games")
    table.add_column("name", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("description", overflow="fold")
    for name in games.names():
        cls = games.game_class(name)
        table.add_row(name, cls.title, cls.description)
    console.print(table)


def terminal_attached() -> bool:
    """Whether the app can run here: Textual reads keys from stdin and draws on stderr."""
    import sys

    return sys.stdin.isatty() and sys.__stderr__ is not None and sys.__stderr__.isatty()


@cli.command()
def tui(db: Optional[Path] = DbOption,
        model: Optional[str] = typer.Option(None, "--model", "-m", callback=model_name, help="Default model "
                                            "(else the config file's, else local/smollm2-135m).")) -> None:
    """Open the terminal app (the default when s3gym is run with no command; `s3gym --db X --model M`
    is `s3gym tui --db X --model M`)."""
    from contextlib import nullcontext

    from s3gym_tui import STARTING
    from s3gym_tui.cli.common import UserError, err, say_upgrade
    from s3gym_tui.textgate import safe_markup

    # the imports and the database check take seconds on a loaded machine: a line says so meanwhile
    # (erased when the app's screen opens; the app's own first frame is its splash)
    with err.status(STARTING) if err.is_terminal else nullcontext() as status:
        from s3gym_tui.app import S3GymApp
        from s3gym_tui.store import Store

        app = S3GymApp(db_path=db, default_model=model)  # reads the config file (ConfigError: one line)
        if status is not None:
            status.update(f"starting s3gym: opening {safe_markup(app.db_path, one_line=True, max_chars=300)} …")

        def upgraded(line: str) -> None:  # said on stderr now and in the app once it is up
            say_upgrade(line)
            app.note_upgrade(line)

        # a corrupt, newer or unreadable database: one line, before the screen opens (a database that
        # does not exist yet is not created for an app that cannot open)
        if terminal_attached() or Path(app.db_path).exists():
            Store(app.db_path, notify=upgraded).close()
    if not terminal_attached():  # else the app waits for keys that never come, drawing into a file
        raise UserError("the app needs a terminal (stdin and stderr); in a script use a command: "
                        "s3gym --help lists them")
    app.run()
    if app.return_code:  # the app crashed (Textual printed why): the process says so too
        raise typer.Exit(app.return_code)




@cli.command("datasette-metadata")
def datasette_metadata(out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write it to this file "
                                                          "(default: stdout)."),
                       db: Optional[Path] = DbOption) -> None:
    """A Datasette metadata file describing every table, view and column of the store:
    `datasette s3gym.db --metadata metadata.json`."""
    from s3gym_tui.cli.common import UserError, _store
    from s3gym_tui.store.metadata import datasette_metadata as build

    store = _store(db)
    document = build(store.conn, store.path.stem)
    if out is None:
        emit_json(document)
        return
    import json

    try:
        out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    console.print(f"wrote {safe_markup(str(out))}: {len(document['databases'][store.path.stem]['tables'])} tables "
                  f"and views described; run `datasette {safe_markup(str(store.path))} --metadata {safe_markup(str(out))}`",
                  soft_wrap=True)


@cli.command()
def migrate(db: Optional[Path] = DbOption,
            no_backup: bool = typer.Option(False, "--no-backup", help="Keep no copy of the old file "
                                           "(needs less free space; there is no way back).")) -> None:
    """Upgrade a database of an older schema to this s3gym's, on purpose: refused while another process
    has it open or the disk is short; keeps a backup next to it (x.db.schemaN.bak) unless --no-backup;
    all-or-nothing (a failure or a kill leaves the old schema). Reading commands never upgrade."""
    from s3gym_tui.cli.common import _store
    from s3gym_tui.textgate import safe

    with _store(db, write=True, backup=not no_backup) as store:
        if store.upgraded is None:
            console.print(safe(f"{store.path} is at schema {store.schema_version}, this s3gym's: "
                               f"nothing to upgrade"), markup=False, highlight=False, soft_wrap=True)
            return
        for line in store.upgraded.transcript():
            console.print(safe(line, one_line=True), markup=False, highlight=False, soft_wrap=True)
