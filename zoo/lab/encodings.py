"""The same 4-bit weights, encoded other ways: which one this runtime decodes fast.

coreai-opt stores int4-block32 as packed uint4 codes with a scale and a minimum per block of
32 inputs, and the Linux CPU runtime expands them with `blockwise_shift_scale` on every
call (`zoo.lab.compression.projection_profile`: 85 % of a projection's time). These
encodings hold the very same codes, scales and minimums and compute the same product
`x @ W.T` with ordinary graph operations, so the runtime never sees a compressed tensor:

- `codes [out, in]`: one code a byte (twice the packed size), cast, scaled and shifted in
  the graph, then the matmul of an `[out, in]` weight (which this runtime transposes);
- `codes [in, out]`: the same, stored in the layout the matmul reads (no transpose);
- `packed, interleaved`: two codes a byte (inputs 2i and 2i + 1), unpacked with `floor`
  (the converter has no bitwise ops: `aten.bitwise_and`, `__rshift__` fail to export) and
  re-interleaved with a `stack`;
- `packed, split`: two codes a byte, the low nibble for the first half of the inputs and the
  high one for the second: two matmuls over the halves of `x`, no re-interleaving.

`encoding_row(name, workdir)` exports one 4096 x 1024 projection so encoded and times it on
the runtime (run it with `run_isolated`); `python -m zoo.bench.compressed_decode` records
them beside coreai-opt's presets (`bench-compressed-decode`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

BLOCK = 32
ROWS, COLUMNS = 4096, 1024  # the projection `projection_profile` times


def block_grid(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Codes `[out, in]` (uint8, 0..15), scales and minimums `[out, in / 32]` (fp16 values)
    of `weight` on int4-block32's grid (min/max per block, as coreai-opt's)."""
    rows, columns = weight.shape
    blocks = weight.reshape(rows, columns // BLOCK, BLOCK)
    low = blocks.amin(-1).half().float()
    scale = ((blocks.amax(-1) - low) / 15).half().float()
    codes = ((blocks - low[..., None]) / scale[..., None]).round().clamp(0, 15)
    return codes.to(torch.uint8).reshape(rows, columns), scale, low


def dequantized(codes: torch.Tensor, scale: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
    rows, columns = codes.shape
    grid = codes.float().reshape(rows, columns // BLOCK, BLOCK)
    return (grid * scale[..., None] + low[..., None]).reshape(rows, columns)


class CodesOutIn(nn.Module):
    def __init__(self, codes, scale, low) -> None:
        super().__init__()
        self.register_buffer("codes", codes.clone())
        self.register_buffer("scale", scale.half())
        self.register_buffer("low", low.half())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ dequantized(self.codes, self.scale.float(), self.low.float()).T


class CodesInOut(nn.Module):
    def __init__(self, codes, scale, low) -> None:
        super().__init__()
        self.register_buffer("codes", codes.T.contiguous())  # [in, out]
        self.register_buffer("scale", scale.T.contiguous().half())  # [blocks, out]
        self.register_buffer("low", low.T.contiguous().half())

    def weight(self, codes: torch.Tensor, first_block: int = 0) -> torch.Tensor:
        """`[in, out]` weights of `codes` (float), the blocks from `first_block` on."""
        inputs, rows = codes.shape
        blocks = inputs // BLOCK
        scale = self.scale.float()[first_block : first_block + blocks, None, :]
        low = self.low.float()[first_block : first_block + blocks, None, :]
        return (codes.reshape(blocks, BLOCK, rows) * scale + low).reshape(inputs, rows)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight(self.codes.float())


class PackedInterleaved(CodesInOut):
    def __init__(self, codes, scale, low) -> None:
        super().__init__(codes, scale, low)
        stored = self.codes
        del self.codes
        self.register_buffer("packed", (stored[0::2] | (stored[1::2] << 4)).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.packed.float()
        high = torch.floor(packed * 0.0625)  # no bitwise ops in the converter
        codes = torch.stack([packed - 16.0 * high, high], 1).reshape(-1, packed.shape[1])
        return x @ self.weight(codes)


class PackedSplit(CodesInOut):
    def __init__(self, codes, scale, low) -> None:
        super().__init__(codes, scale, low)
        stored, half = self.codes, self.codes.shape[0] // 2
        del self.codes
        self.register_buffer("packed", (stored[:half] | (stored[half:] << 4)).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.packed.float()
        high = torch.floor(packed * 0.0625)
        half = packed.shape[0]
        first = self.weight(packed - 16.0 * high)
        second = self.weight(high, first_block=half // BLOCK)
        return x[..., :half] @ first + x[..., half:] @ second


ENCODINGS = {
    "codes [out, in]": CodesOutIn,
    "codes [in, out]": CodesInOut,
    "packed, interleaved": PackedInterleaved,
    "packed, split": PackedSplit,
}


def encoding_row(name: str, workdir: str, calls: int = 25) -> dict:
    """One projection encoded as `name`, exported alone and timed on the runtime, as
    `projection_profile` times coreai-opt's presets; its largest gap to the dequantized
    product (run it with `run_isolated`)."""
    from zoo.core.export.convert import export
    from zoo.lab.profile import time_and_profile

    torch.manual_seed(0)
    weight = torch.randn(ROWS, COLUMNS) * 0.02
    x = torch.randn(1, 1, COLUMNS)
    grid = block_grid(weight)
    want = (x @ dequantized(*grid).T).numpy()
    module = ENCODINGS[name](*grid).eval()
    path = Path(workdir) / f"encoding-{name.replace(' ', '').replace(',', '-')}.aimodel"
    export(module, (x,), path, input_names=["x"], output_names=["y"], overwrite=True)
    got, seconds, top = time_and_profile(path, x.numpy(), calls)
    return {
        "encoding": name,
        "asset bytes": sum(f.stat().st_size for f in path.iterdir() if f.is_file()),
        "warm ms (median)": round(float(np.median(seconds[5:])) * 1e3, 2),
        "max abs vs dequantized": float(f"{np.abs(got - want).max():.2g}"),
        "most expensive op": top["op"],
        "its share": top["share"],
    }
