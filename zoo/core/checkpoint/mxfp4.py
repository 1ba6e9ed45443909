"""MXFP4 tensors as released (GPT-OSS's experts), read as float32.

A checkpoint with `quantization_config: {quant_method: mxfp4}` stores each expert weight as
two tensors: `<name>_blocks` (uint8 `[experts, rows, groups, 16]`, two 4-bit E2M1 codes a
byte, low nibble first) and `<name>_scales` (uint8 `[experts, rows, groups]`, an E8M0
power of two per group of 32 codes, biased by 127). transformers 5.23 dequantizes them to
`[experts, groups * 32, rows]` (its `convert_moe_packed_tensors`); so does this module,
exactly: an E2M1 value times a power of two is a float32 without rounding.

The zoo dequantizes on read, then compresses with the export's preset like any weight:
the export's presets are what the runtime and the pages measure, and an fp32 export of
the released weights is exact. (coreai-opt 0.4.0 has an FP4 E2M1 dtype with E8M0 scales;
keeping the released codes as they are through it is not done here.)
"""

from __future__ import annotations

import math

import torch

BLOCKS, SCALES = "_blocks", "_scales"

# the 16 E2M1 codes: sign bit, two exponent bits, one mantissa bit
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def packed_name(key: str) -> str | None:
    """The weight a `<name>_blocks` key holds (None: not MXFP4 blocks)."""
    return key.removesuffix(BLOCKS) if key.endswith(BLOCKS) else None


def weight_of(key: str) -> str:
    """The weight a stored key belongs to: itself, or the one its blocks or scales hold."""
    return key.removesuffix(BLOCKS).removesuffix(SCALES)


def dequantized_shape(blocks_shape: tuple[int, ...]) -> tuple[int, ...]:
    """`[experts, rows, groups, 16]` blocks -> the `[experts, groups * 32, rows]` weight."""
    experts, rows, groups, pairs = blocks_shape
    return (experts, groups * pairs * 2, rows)


def stored_values(key: str, shape: tuple[int, ...]) -> int:
    """How many weights a stored tensor holds: two a byte in MXFP4 blocks, none in their
    scales (which belong to the blocks' weight)."""
    if key.endswith(SCALES):
        return 0
    return math.prod(shape) * (2 if key.endswith(BLOCKS) else 1)


def dequantize(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float32 `[experts, groups * 32, rows]` from MXFP4 blocks and scales (one expert at a
    time: the index temporaries stay the size of one expert's codes)."""
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(f"MXFP4 blocks and scales are uint8, not {blocks.dtype}, {scales.dtype}")
    if blocks.dim() != 4 or tuple(blocks.shape[:-1]) != tuple(scales.shape):
        raise ValueError(
            f"MXFP4 blocks {tuple(blocks.shape)} do not match scales {tuple(scales.shape)}"
        )
    experts, rows, groups, pairs = blocks.shape
    table = torch.tensor(E2M1, dtype=torch.float32)
    out = torch.empty(dequantized_shape(tuple(blocks.shape)), dtype=torch.float32)
    for expert in range(experts):
        codes = blocks[expert].long()
        values = torch.stack((table[codes & 0x0F], table[codes >> 4]), dim=-1)
        exponents = scales[expert, ..., None].int() - 127
        values = torch.ldexp(values.reshape(rows, groups, pairs * 2), exponents)
        out[expert] = values.reshape(rows, groups * pairs * 2).T
    return out


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """MXFP4 blocks and scales of a float `[experts, groups * 32, rows]` weight, as the OCP
    microscaling rule makes them: per group of 32, the power of two that puts the largest
    magnitude in [4, 8), codes rounded to the nearest E2M1 value (6 at most). For writing
    checkpoints as released (tests, the bench); `dequantize` inverts it exactly on its
    output."""
    experts, inputs, rows = weight.shape
    if inputs % 32:
        raise ValueError(f"MXFP4 groups 32 inputs; the weight has {inputs}")
    groups = inputs // 32
    magnitudes = torch.tensor(E2M1[:8], dtype=torch.float32)
    blocks = torch.empty(experts, rows, groups, 16, dtype=torch.uint8)
    scales = torch.empty(experts, rows, groups, dtype=torch.uint8)
    for expert in range(experts):
        values = weight[expert].float().T.reshape(rows, groups, 32)
        largest = values.abs().amax(dim=-1, keepdim=True)
        exponent = torch.where(largest > 0, torch.floor(torch.log2(largest)) - 2, -127.0)
        exponent = exponent.clamp(-127, 127)
        scaled = torch.ldexp(values, -exponent.int())
        code = (scaled.abs()[..., None] - magnitudes).abs().argmin(dim=-1)
        code = code + 8 * (scaled < 0)
        code = code.to(torch.uint8).reshape(rows, groups, 16, 2)
        blocks[expert] = code[..., 0] | (code[..., 1] << 4)
        scales[expert] = (exponent[..., 0] + 127).to(torch.uint8)
    return blocks, scales
