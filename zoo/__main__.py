"""`python -m zoo export CKPT OUT.aimodel` / `generate ASSET` / `list`: the `zoo` command."""

import sys

from zoo.core.command import main

if __name__ == "__main__":
    sys.exit(main())
