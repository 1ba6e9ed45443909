"""`python -m zoo.gemma4_unified export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel ...`."""

import sys

from zoo.core.cli.commands import run

if __name__ == "__main__":
    sys.exit(run("gemma4_unified"))
