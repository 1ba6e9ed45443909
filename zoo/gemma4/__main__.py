"""`python -m zoo.gemma4 export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel --prompt ...`."""

import sys

from zoo.core.cli.commands import run

if __name__ == "__main__":
    sys.exit(run("gemma4"))
