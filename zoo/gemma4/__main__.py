"""`python -m zoo.gemma4 export CHECKPOINT OUT.aimodel` / `generate OUT.aimodel --prompt ...`."""

import sys

from zoo.core.cli import run
from zoo.gemma4 import export_gemma4, load_gemma4

if __name__ == "__main__":
    sys.exit(run("gemma4", load_gemma4, export_gemma4))
