"""Keep library noise out of what a user asked for: the command line's output and the
pages' (set `ZOO_DEBUG=1` to see it all)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# logger -> why its warnings are noise here
NOISY_LOGGERS = {
    "torchao": "CUDA-only kernels (`_C_cutlass_90a`, `_C_mxfp8`) that cannot load on a CPU",
    "torch.utils._pytree": "torch.export's own enum-registration deprecations",
}
# lines the Core AI runtime writes to the process's stderr from native code
RUNTIME_CHATTER = re.compile(r"ODIE \[default\]: Loading function ")


def debugging() -> bool:
    return os.environ.get("ZOO_DEBUG", "") not in ("", "0")


def quiet_loggers() -> None:
    """Raise the noisy libraries' loggers to errors only (before they are imported)."""
    if not debugging():
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def runtime_chatter_hidden() -> Iterator[None]:
    """Run a block with the process's stderr (file descriptor 2, where native code writes)
    captured, then pass on every line but the runtime's `RUNTIME_CHATTER`."""
    if debugging():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if not RUNTIME_CHATTER.search(line):
                    sys.stderr.write(line)
            sys.stderr.flush()
