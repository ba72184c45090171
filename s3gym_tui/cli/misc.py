"""Commands that need no run: play (reference policy), models, games, tui (the app)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from s3gym_tui.cli.common import DbOption, cli, console


@cli.command()
def play(game: str = typer.Argument(...), mode: str = typer.Option("explore", "--mode"),
         seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Default: the mode's first seed."),
         delay: float = typer.Option(0.0, "--delay", min=0.0, max=60.0, help="Seconds between steps.")) -> None:
    """Watch the game's reference policy play one episode in the terminal (no model, no store)."""
    import time

    import games
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
        console.print(escape(result.feedback))
        console.print(g.render())
        if delay:
            time.sleep(delay)
    console.print(f"[bold]final score {g.score():g}[/]")


@cli.command()
def models() -> None:
    """The built-in models (no key, no network); any litellm model string works too."""
    from s3gym_tui.providers import BUILTIN_MODELS

    table = Table(title="built-in models")
    table.add_column("model")
    table.add_column("what it is")
    for name, description in BUILTIN_MODELS:
        table.add_row(name, description)
    console.print(table)


@cli.command("games")
def list_games() -> None:
    """The seven games."""
    import games

    table = Table(title="games")
    table.add_column("name")
    table.add_column("title")
    table.add_column("description")
    for name in games.names():
        cls = games.game_class(name)
        table.add_row(name, cls.title, cls.description)
    console.print(table)


@cli.command()
def tui(db: Optional[Path] = DbOption,
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Default model (else the config "
                                            "file's, else local/smollm2-135m).")) -> None:
    """Open the terminal app (the default when s3gym is run with no command; `s3gym --db X --model M`
    is `s3gym tui --db X --model M`)."""
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.store import Store

    app = S3GymApp(db_path=db, default_model=model)  # reads the config file (ConfigError: one line)
    Store(app.db_path).close()  # a corrupt, newer or unreadable database: one line, before the screen opens
    app.run()
    if app.return_code:  # the app crashed (Textual printed why): the process says so too
        raise typer.Exit(app.return_code)


