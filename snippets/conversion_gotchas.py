"""Conversion gotchas on the pinned toolchain, each one asserted.

Every section below is shown on docs/guides/conversion-guide.md and fails
loudly if the behaviour it documents changes. Run:

    python snippets/conversion_gotchas.py               # check every gotcha
    python snippets/conversion_gotchas.py --record DIR  # and write a record
"""

# --8<-- [start:setup]
import asyncio
import tempfile
import time
from pathlib import Path

import coreai_torch
import numpy as np
import torch
from coreai_torch import TorchConverter
from torch import nn


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


def convert(module, example_inputs, input_names, output_names, state_names=()):
    """The raw coreai-torch path: torch.export -> decompositions -> program."""
    converter = TorchConverter(mode=TorchConverter.Mode.RELEASE)
    converter.add_pytorch_module(
        module.eval(),
        export_fn=lambda m: torch.export.export(
            m, example_inputs
        ).run_decompositions(coreai_torch.get_decomp_table()),
        input_names=input_names,
        output_names=output_names,
        state_names=state_names,
    )
    return converter.to_coreai()


scratch = tempfile.TemporaryDirectory(prefix="gotchas-")  # removed at exit
workdir = Path(scratch.name)
# --8<-- [end:setup]

# --8<-- [start:save_asset_replaces]
path = workdir / "scale.aimodel"
convert(Scale(2.0), (torch.ones(4),), ["x"], ["y"]).save_asset(path)
first = (path / "main.hash").read_bytes()
convert(Scale(3.0), (torch.ones(4),), ["x"], ["y"]).save_asset(
    path
)  # no error, no warning
assert (path / "main.hash").read_bytes() != first, (
    "expected the first asset to be replaced"
)

from zoo import export_module as export

try:
    export(
        Scale(4.0),
        (torch.ones(4),),
        path,
        input_names=["x"],
        output_names=["y"],
    )
except FileExistsError as error:
    print(error)  # ... already exists; replace it with --overwrite ...
else:
    raise AssertionError(
        "zoo.core.export.convert replaced an existing asset without "
        "overwrite=True"
    )
# --8<-- [end:save_asset_replaces]

# --8<-- [start:save_asset_str]
program = convert(Scale(2.0), (torch.ones(4),), ["x"], ["y"])
try:
    program.save_asset(str(workdir / "from_str.aimodel"))
except AttributeError as error:
    print(
        f"{type(error).__name__}: {error}"
    )  # 'str' object has no attribute 'suffix'
else:
    raise AssertionError("save_asset accepted a str path")
program.save_asset(workdir / "from_path.aimodel")  # a Path works
# --8<-- [end:save_asset_str]

# --8<-- [start:int64]
from zoo.core.host.runtime import Model, RuntimeInputError

embedding = nn.Embedding(16, 4)
ids = torch.tensor([[1, 2, 3]])  # torch's default integer dtype: int64
export(
    embedding,
    (ids,),
    workdir / "embed.aimodel",
    input_names=["ids"],
    output_names=["h"],
)

with Model.load(workdir / "embed.aimodel") as loaded:
    lookup = loaded.function("main")
    print(
        lookup.inputs
    )  # {'ids': ((1, 3), <class 'numpy.int32'>)}: exported as int32
    try:
        lookup({"ids": ids.numpy()})  # int64
    except RuntimeInputError as error:
        print(error)
    else:
        raise AssertionError("the runtime accepted int64 ids")
    h = lookup({"ids": ids.numpy().astype(np.int32)})["h"]
np.testing.assert_allclose(h, embedding(ids).detach().numpy(), atol=1e-6)
# --8<-- [end:int64]

# --8<-- [start:int64_raw]
from coreai.authoring.asset import AIModelAsset
from coreai.runtime import NDArray


async def call_with_int64(path: Path) -> str:
    async with AIModelAsset.load(path).executable() as loaded:
        lookup = loaded.load_function("main")
        try:
            await lookup(
                inputs={"ids": NDArray(np.array([[1, 2, 3]], dtype=np.int64))}
            )
        except RuntimeError as error:
            return str(error)
    raise AssertionError("the raw runtime accepted int64 ids")


print(asyncio.run(call_with_int64(workdir / "embed.aimodel")))
# ids has an invalid scalar type: int64, expected: int32
# --8<-- [end:int64_raw]

# --8<-- [start:sync_async]
export(
    Scale(2.0),
    (torch.ones(4),),
    workdir / "double.aimodel",
    input_names=["x"],
    output_names=["y"],
)


async def run_raw(path: Path, x: np.ndarray) -> np.ndarray:
    asset = AIModelAsset.load(path)  # sync: reads the asset directory
    async with (
        asset.executable() as loaded
    ):  # async: compiles (Linux) and loads
        double = loaded.load_function("main")  # sync
        pending = double(
            inputs={"x": NDArray(x)}
        )  # a coroutine: nothing has run yet
        assert asyncio.iscoroutine(pending)
        outputs = await pending  # async: runs the function
        return outputs["y"].numpy().copy()  # copy before the model goes away


y = asyncio.run(
    run_raw(workdir / "double.aimodel", np.arange(4, dtype=np.float32))
)
np.testing.assert_array_equal(y, [0, 2, 4, 6])

# zoo.core.host.runtime does the same synchronously (its event loop runs on a
# thread of its own, so it also works inside Jupyter, where asyncio.run()
# refuses to start a second loop).
with Model.load(workdir / "double.aimodel") as loaded:
    y = loaded.function("main")({"x": np.arange(4, dtype=np.float32)})["y"]
np.testing.assert_array_equal(y, [0, 2, 4, 6])
# --8<-- [end:sync_async]


# --8<-- [start:states]
class Counter(nn.Module):
    def forward(self, x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        count.copy_(count + 1)  # mutated in place: a state
        return x + count


export(
    Counter(),
    (torch.zeros(1), torch.zeros(1)),
    workdir / "counter.aimodel",
    input_names=["x"],
    output_names=["y"],
    state_names=["count"],
)


async def count_three_times(path: Path) -> tuple[list[float], str]:
    async with AIModelAsset.load(path).executable() as loaded:
        step = loaded.load_function("main")
        count = NDArray(np.zeros(1, np.float32))
        seen = []
        for _ in range(3):
            await step(
                inputs={"x": NDArray(np.zeros(1, np.float32))},
                state={"count": count},
            )
            seen.append(
                float(count.numpy()[0])
            )  # written back into the same NDArray
        try:
            await step(
                inputs={"x": NDArray(np.zeros(1, np.float32))}
            )  # no state passed
        except RuntimeError as error:
            return seen, str(error)
    raise AssertionError("a call without its state ran")


seen, error = asyncio.run(count_three_times(workdir / "counter.aimodel"))
print(seen, error)  # [1.0, 2.0, 3.0] Missing state view for count.
assert seen == [1.0, 2.0, 3.0] and "Missing state view" in error
# --8<-- [end:states]

# --8<-- [start:fp16]
import copy


class MLP(nn.Module):
    def __init__(self, width: int = 512, depth: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Linear(width, width) for _ in range(depth)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def median_call_ms(
    path: Path, x: np.ndarray, calls: int = 10
) -> tuple[float, np.ndarray]:
    with Model.load(path) as loaded:
        run = loaded.function("main")
        y = run({"x": x})["y"]  # warm-up
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            run({"x": x})
            times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times)), y


torch.manual_seed(0)
mlp, x = MLP().eval(), torch.randn(8, 512)
with torch.no_grad():
    reference = copy.deepcopy(mlp).double()(x.double()).numpy()
fp16_rows = []
for dtype in (torch.float32, torch.float16):
    name = str(dtype).removeprefix("torch.")
    path = export(
        copy.deepcopy(mlp).to(dtype),
        (x.to(dtype),),
        workdir / f"mlp_{name}.aimodel",
        input_names=["x"],
        output_names=["y"],
    )
    ms, y = median_call_ms(path, x.to(dtype).numpy())
    error = float(np.abs(y.astype(np.float64) - reference).max())
    fp16_rows.append(
        {
            "dtype": name,
            "median ms per call": round(ms, 3),
            "max abs error vs float64": float(f"{error:.2g}"),
        }
    )
print(fp16_rows)
fp32, fp16 = fp16_rows
assert fp16["max abs error vs float64"] > 10 * fp32["max abs error vs float64"]
# --8<-- [end:fp16]


if __name__ == "__main__":
    import sys

    from zoo import write_record

    if "--record" in sys.argv:
        directory = Path(sys.argv[sys.argv.index("--record") + 1])
        gotchas = [
            "save_asset_replaces",
            "save_asset_str",
            "int64",
            "sync_async",
            "states",
            "fp16",
        ]
        record = write_record(
            directory,
            "conversion-gotchas",
            {"held": gotchas, "fp16_vs_fp32": fp16_rows},
        )
        print(f"wrote {record}")
