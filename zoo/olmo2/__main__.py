"""`python -m zoo.olmo2 export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel --prompt ...`."""

import sys

from zoo.core.cli.commands import run

if __name__ == "__main__":
    sys.exit(run("olmo2"))
