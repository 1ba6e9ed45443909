"""`python -m zoo.qwen3_5 export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel --prompt ...`."""

import sys

from zoo.core.cli import run
from zoo.qwen3_5 import export_qwen3_5, load_qwen3_5

if __name__ == "__main__":
    sys.exit(run("qwen3_5", load_qwen3_5, export_qwen3_5))
