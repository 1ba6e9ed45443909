"""`python -m zoo ...`: the `zoo` command (zoo.command)."""

import sys

from zoo.command import main

if __name__ == "__main__":
    sys.exit(main())
