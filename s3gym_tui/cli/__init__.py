"""The headless command line (typer + rich). Commands live in one module per area; importing
this package registers them all on `cli`."""

# Importing the command modules registers their commands, in the order `--help` lists them.
from s3gym_tui.cli import demo  # noqa: F401,I001
from s3gym_tui.cli import runs  # noqa: F401
from s3gym_tui.cli import report  # noqa: F401
from s3gym_tui.cli import sweep  # noqa: F401
from s3gym_tui.cli import train  # noqa: F401
from s3gym_tui.cli import distill  # noqa: F401
from s3gym_tui.cli import export_model  # noqa: F401
from s3gym_tui.cli import search  # noqa: F401
from s3gym_tui.cli import credit  # noqa: F401
from s3gym_tui.cli import hygiene  # noqa: F401
from s3gym_tui.cli import misc  # noqa: F401
from s3gym_tui.cli import aspire  # noqa: F401
from s3gym_tui.cli.common import UserError, cli, console, err
from s3gym_tui.cli.entry import main

__all__ = ["cli", "main", "UserError", "console", "err"]
