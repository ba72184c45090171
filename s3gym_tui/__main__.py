"""`python -m s3gym_tui` and the `s3gym` command."""

import sys

from s3gym_tui.cli import main

if __name__ == "__main__":
    sys.exit(main())
