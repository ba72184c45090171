"""`python -m s3gym_tui` and the `s3gym` command."""

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


def main(argv: Optional[list[str]] = None) -> int:
    if command_args(argv)[0] == "tui" and sys.stderr.isatty():
        # before the first import: the app's start line (cli/misc.py) takes this line over and erases it
        sys.stderr.write(f"{STARTING}\r")
        sys.stderr.flush()
    from s3gym_tui.cli import main as cli_main

    code = cli_main(argv)
    if "torch" in sys.modules:
        # The interpreter's last garbage collections walk every object torch, transformers and TRL made:
        # 5-7 s after a training on a busy 2-core machine, most of the time from Ctrl-C to the exit.
        # Everything is stored and flushed by now: those objects are left out of the collections.
        import gc

        gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())
