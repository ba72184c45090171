"""`python -m s3gym_tui` and the `s3gym` command."""

import sys
from typing import Optional

from s3gym_tui import STARTING, command_args


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
