"""`python -m zoo.qwen3_5_moe export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel ...`."""

import sys

from zoo.core.cli.commands import run

if __name__ == "__main__":
    sys.exit(run("qwen3_5_moe"))
