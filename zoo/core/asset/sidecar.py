"""Lookup tables kept out of the graph: stored int8 beside the program, read by the host.

Gemma 4's per-layer-embedding (PLE) table is a row lookup of 262,144 x 8,960 values for
E2B: 9.4 GB at fp32, more than the rest of the decoder, and only one row per token is ever
read. In the graph it is a constant the runtime must hold; as a sidecar file it is an int8
table (one fp32 scale per row: 2.3 GB for E2B) that the host decode loop reads a row of per
token and passes to the graph as an input. Apple's Gemma 4 recipe ships its PLE table the
same way (an INT8 sidecar, reported in apple/coreai-models `models/gemma4`).

The table is quantized from the checkpoint in blocks of rows, in its stored dtype: never a
whole fp32 copy. Torch eager reads the same int8 rows (`SidecarSource.rows`), so an asset
and its eager model compute the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

if TYPE_CHECKING:  # the host's lookup (SidecarTable) needs numpy only
    import torch

ROWS_PER_BLOCK = 4096  # rows quantized at a time: 4096 x 8960 bf16 is 73 MB


def quantize_rows(rows: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: (values int8 `[n, width]`, scales float32 `[n]`)."""
    import torch

    rows = rows.float()
    scales = rows.abs().amax(dim=-1).clamp(min=1e-12) / 127.0
    values = torch.round(rows / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return values.numpy(), scales.numpy().astype(np.float32)


def dequantize(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return values.astype(np.float32) * scales[:, None]


@dataclass(frozen=True)
class SidecarSource:
    """A table in a checkpoint's safetensors file, kept out of the model: `file`, `key`."""

    file: Path
    key: str

    def _slice(self, tensors):
        return tensors.get_slice(self.key)

    @property
    def shape(self) -> tuple[int, int]:
        with safe_open(str(self.file), framework="pt") as tensors:
            rows, width = self._slice(tensors).get_shape()
        return rows, width

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """The int8-quantized rows of `ids` (`[B, T]`), dequantized: `[B, T, width]`."""
        import torch

        flat = ids.reshape(-1).tolist()
        with safe_open(str(self.file), framework="pt") as tensors:
            table = self._slice(tensors)
            picked = torch.cat([table[i : i + 1] for i in flat]) if flat else None
        self._check_finite(picked, 0)
        values, scales = quantize_rows(picked)
        return torch.from_numpy(dequantize(values, scales)).reshape(*ids.shape, -1)

    def _check_finite(self, block, start: int) -> None:
        """A NaN or inf in the table would quantize to garbage rows, silently: refused."""
        import torch

        if block is not None and not bool(torch.isfinite(block.float()).all()):
            from zoo.core.checkpoint.config import CheckpointError

            raise CheckpointError(
                f"{self.file}: {self.key} has NaN or infinite values (rows from {start}): "
                "the checkpoint is damaged"
            )

    def write(self, path: Path) -> dict:
        """Quantize the table block by block into `path` (safetensors: `values`, `scales`)."""
        rows, width = self.shape
        values = np.empty((rows, width), np.int8)
        scales = np.empty(rows, np.float32)
        with safe_open(str(self.file), framework="pt") as tensors:
            table = self._slice(tensors)
            for start in range(0, rows, ROWS_PER_BLOCK):
                block = table[start : start + ROWS_PER_BLOCK]
                self._check_finite(block, start)
                values[start : start + len(block)], scales[start : start + len(block)] = (
                    quantize_rows(block)
                )
        save_file({"values": values, "scales": scales}, str(path))
        return {"file": path.name, "rows": rows, "width": width, "dtype": "int8, fp32 row scales"}


class SidecarTable:
    """The host's side: rows of an exported sidecar file, read on demand (memory-mapped by
    safetensors, so a 2 GB table costs no RAM until rows are read)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = safe_open(str(self.path), framework="numpy")
        self._values = self._file.get_slice("values")
        self._scales = self._file.get_tensor("scales")
        self.rows, self.width = self._values.get_shape()

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """float32 `[B, T, width]` rows of `ids` `[B, T]`."""
        flat = np.asarray(ids).reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= self.rows):
            raise ValueError(f"token id outside the {self.rows} rows of {self.path.name}")
        values = np.concatenate([self._values[int(i) : int(i) + 1] for i in flat])
        rows = dequantize(values, self._scales[flat])
        return rows.reshape(*np.asarray(ids).shape, self.width)
