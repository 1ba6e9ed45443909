"""A runtime fatal error kills the process: contain it with zoo.core.isolate.

An `index_put` KV write (`cache[:, step] = x` with `step` a tensor)
converts without complaint, then the Linux runtime dies on the first call
with a Swift fatal error: SIGILL, no Python exception. Run:

    python snippets/runtime_crash.py
"""

# --8<-- [start:repro]
import asyncio
import tempfile
from pathlib import Path

import numpy as np
import torch

from zoo import export_module as export


class IndexPutWrite(torch.nn.Module):
    """Writes x at row `step` of the state: lowered through index_put."""

    def forward(
        self, x: torch.Tensor, step: torch.Tensor, cache: torch.Tensor
    ) -> torch.Tensor:
        cache[:, step] = x
        return cache.sum(dim=1)


def export_and_run_index_put_write() -> list[float]:
    """Export the write, then call it through the raw Core AI API."""
    from coreai.authoring.asset import AIModelAsset
    from coreai.runtime import NDArray

    x, step, cache = (
        torch.ones(1, 1, 8),
        torch.tensor([0], dtype=torch.int32),
        torch.zeros(1, 16, 8),
    )
    path = Path(tempfile.mkdtemp()) / "index_put.aimodel"
    export(
        IndexPutWrite(),
        (x, step, cache),
        path,
        input_names=["x", "step"],
        output_names=["total"],
        state_names=["cache"],
    )

    async def run() -> list[float]:
        async with AIModelAsset.load(path).executable() as model:
            fn = model.load_function("main")
            state = {"cache": NDArray(cache.numpy())}
            inputs = {
                "x": NDArray(x.numpy()),
                "step": NDArray(np.array([1], np.int32)),
            }
            out = await fn(inputs=inputs, state=state)  # the process dies here
            return out["total"].numpy().ravel().tolist()

    return asyncio.run(run())


# --8<-- [end:repro]


if __name__ == "__main__":
    # --8<-- [start:isolate]
    from zoo import run_isolated

    outcome = run_isolated(export_and_run_index_put_write, timeout=300)
    print(
        f"index_put write: {outcome.summary()} after {outcome.seconds:.1f} s"
    )
    assert outcome.status == "crashed" and outcome.signal == "SIGILL", (
        outcome.summary()
    )
    # --8<-- [end:isolate]

    import sys

    if "--record" in sys.argv:
        from zoo import write_record

        row = {
            "repro": "index_put KV write (cache[:, step] = x)",
            "outcome": outcome.summary(),
            "seconds": outcome.seconds,
        }
        directory = sys.argv[sys.argv.index("--record") + 1]
        record = write_record(directory, "runtime-crash", {"outcomes": [row]})
        print(f"wrote {record}")
