"""s3gym: watch, judge and steer LLM agents on the seven S3Gym games."""

import sys
from typing import Optional

STARTING = "starting s3gym …"  # on the terminal at once while the app's imports load (seconds when loaded)


def command_args(argv: Optional[list[str]] = None) -> list[str]:
    """The command line as the CLI reads it: bare `s3gym` is the app, and so is `s3gym --db X --model M`
    (`s3gym tui --db X --model M`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0].startswith("-") and args[0] not in ("--help", "-h", "--version")):
        args = ["tui", *args]
    return args
