"""`python -m zoo.gpt_oss export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel --prompt ...`."""

import sys

from zoo.core.cli.commands import run

if __name__ == "__main__":
    sys.exit(run("gpt_oss"))
