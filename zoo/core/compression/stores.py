"""How each module's weight is stored, through coreai-opt: the choice per module of every
compression preset (`zoo.core.compression.presets.PRESETS`), and the compressor that stores it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn

# How one module is stored: ("quantize" | "palettize", a coreai-opt module config, the
# bits of each weight's code: 8, 4).
Choice = tuple[str, object, int]


class AsFloat32(nn.Module):
    """The last parametrization of a weight compressed in fp16: the fp32 graph's dtype."""

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight.float()


class Holder(nn.Module):
    """A module alone, as coreai-opt compresses a model: one child to find by type."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def compressor_for(kind: str, config, module_type: type):
    """A coreai-opt compressor factory: holder -> object with prepare / finalize."""
    type_name = f"{module_type.__module__}.{module_type.__name__}"
    if kind == "quantize":
        from coreai_opt.quantization import ExecutionMode, Quantizer, QuantizerConfig

        quantizer_config = QuantizerConfig(
            global_config=None,  # only the module named: norms, RoPE, SDPA stay as they are
            module_type_configs={type_name: config},
            execution_mode=ExecutionMode.EAGER,
        )
        return lambda holder: Quantizer(holder, quantizer_config)
    import functools

    from coreai_opt.palettization import KMeansPalettizer, KMeansPalettizerConfig
    from coreai_opt.palettization.kmeans import palettizer
    from tqdm import tqdm

    # one module at a time: its progress bar (one step) would print once per module; our
    # load reports progress by layer instead
    palettizer.tqdm = functools.partial(tqdm, disable=True)
    palettizer_config = KMeansPalettizerConfig(
        global_config=None, module_type_configs={type_name: config}
    )
    return lambda holder: KMeansPalettizer(holder, palettizer_config)


def quiet_imports() -> None:
    """torchao (imported by coreai-opt) logs CUDA kernels it cannot load and torch notes on
    its enums at import: nothing a reader of this CPU build can act on."""
    import logging

    # coreai_opt: "Disabling palettization for weight 'inner.weight'" names our holder, not
    # the module; what each preset leaves uncompressed is in docs/guides/compression.md
    for name in ("torchao", "torch.utils._pytree", "coreai_opt"):
        logging.getLogger(name).setLevel(logging.ERROR)


def projection_or_table(module: nn.Module) -> bool:
    """A weight the presets compress: projections and tables, not a mixture's router."""
    return isinstance(module, nn.Linear | nn.Embedding) and not getattr(module, "is_router", 0)


def is_stacked(module: nn.Module) -> bool:
    """Experts stored stacked `[experts, in, out]` (zoo.core.model.experts.StackedExperts)."""
    return hasattr(module, "COMPRESSED")


def weight_config(
    states: tuple[str, ...], dtype: torch.dtype, asymmetric: bool, block: int | tuple[int, ...]
):
    """coreai-opt's config storing each of `states` in `dtype`: asymmetric (min-value
    formulation) or symmetric, in blocks of `block` inputs along axis 1 (a Linear) or, as
    a tuple, a block shape per axis (stacked experts: one block per expert and output)."""
    from coreai_opt.quantization import ModuleQuantizerConfig, QuantizationSpec
    from coreai_opt.quantization.spec import (
        PerBlockGranularity,
        QuantizationFormulation,
        QuantizationScheme,
    )

    blocks = (
        PerBlockGranularity(axis=None, block_size=block)
        if isinstance(block, tuple)
        else PerBlockGranularity(axis=1, block_size=block)
    )
    spec = QuantizationSpec(
        dtype=dtype,
        qscheme=QuantizationScheme.ASYMMETRIC if asymmetric else QuantizationScheme.SYMMETRIC,
        qformulation=(QuantizationFormulation.MINVAL if asymmetric else QuantizationFormulation.ZP),
        granularity=blocks,
    )
    return ModuleQuantizerConfig(
        op_input_spec=None, op_output_spec=None, op_state_spec=dict.fromkeys(states, spec)
    )


def stacked_blocks(module: nn.Module, block: int) -> tuple[int, int, int]:
    """Blocks of `block` inputs (-1: all) per expert and output column of a stacked weight
    (`IN_AXIS`: 1 for `[experts, in, out]`, 2 for `[experts, out, in]`)."""
    return (1, block, 1) if module.IN_AXIS == 1 else (1, 1, block)


def int8_per_channel(name: str, module: nn.Module) -> Choice | None:
    # the embedding tables too: a tied head reads the same (dequantized) table, and a
    # 248k-row table is a third of a small model
    from coreai_opt.quantization import ModuleQuantizerConfig

    if is_stacked(module):
        blocks = stacked_blocks(module, -1)
        return "quantize", weight_config(module.COMPRESSED, torch.int8, False, blocks), 8
    if not projection_or_table(module):
        return None
    return "quantize", ModuleQuantizerConfig.presets.w8(), 8


def int4_blocks(block: int) -> Callable[[str, nn.Module], Choice | None]:
    """uint4 per block of `block` inputs, asymmetric (min-value), for every projection,
    table and stack of experts."""

    def choose(name: str, module: nn.Module) -> Choice | None:
        if is_stacked(module):
            blocks = stacked_blocks(module, block)
            return "quantize", weight_config(module.COMPRESSED, torch.uint4, True, blocks), 4
        if not projection_or_table(module):
            return None
        return "quantize", weight_config(("weight",), torch.uint4, True, block), 4

    return choose


int4_block32 = int4_blocks(32)


# Gemma 4's per-layer-embedding gate and projection: 8 bits, as Apple's preset
EIGHT_BIT_LUT = ("per_layer_input_gate", "per_layer_projection")


def palettize4_groups(name: str, module: nn.Module) -> Choice | None:
    if not isinstance(module, nn.Linear):  # embedding tables stay fp32, as Apple's preset
        return None
    from coreai_opt.palettization import ModuleKMeansPalettizerConfig

    if name.rpartition(".")[2] in EIGHT_BIT_LUT:
        return "palettize", ModuleKMeansPalettizerConfig.presets.w8(), 8  # per tensor
    return "palettize", ModuleKMeansPalettizerConfig.presets.w4(group_size=32), 4


def palettize8_per_tensor(name: str, module: nn.Module) -> Choice | None:
    """A 256-entry LUT for the whole projection (coreai-opt's 8-bit preset)."""
    if not isinstance(module, nn.Linear):
        return None
    from coreai_opt.palettization import ModuleKMeansPalettizerConfig

    return "palettize", ModuleKMeansPalettizerConfig.presets.w8(), 8


def lut_or_table(lut: Callable, table: Callable) -> Callable[[str, nn.Module], Choice | None]:
    """Projections palettized by `lut`, embedding tables (which coreai-opt 0.4.0 does not
    palettize) quantized by `table`: the two halves of a mixed palettized preset."""

    def choose(name: str, module: nn.Module) -> Choice | None:
        if isinstance(module, nn.Embedding):
            return table(name, module)
        return lut(name, module) if projection_or_table(module) else None

    return choose


def fp16_pass(program):
    from coreai_opt.casting import cast_fp32_to_fp16

    return cast_fp32_to_fp16(program)


def stored_bits(model: nn.Module) -> tuple[int, int]:
    """(bits, weights) of every parameter as the asset stores it, as Apple's bits per
    weight counts them: codes at their width (4-bit codes as 4, though held a byte each
    here), scales, offsets and lookup tables at their dtype, and every weight left
    uncompressed (embeddings, norms, biases, the router) at its own dtype."""
    from torch.nn.utils import parametrize

    bits = weights = 0
    for module in model.modules():
        compressed = (
            dict(module.parametrizations.items()) if parametrize.is_parametrized(module) else {}
        )
        for chain in compressed.values():
            stored = chain[0]
            buffers = dict(stored.named_buffers())
            if "lut" in buffers:  # palettized: indices of log2(entries) bits, and the LUTs
                codes, entries = buffers.pop("indices"), buffers["lut"].shape[-2]
                width = max(1, (entries - 1).bit_length())
            else:
                codes = buffers.pop("quantized_data")
                width = _dtype_bits(getattr(stored, "input_dtype", None) or codes.dtype)
            bits += codes.numel() * width
            bits += sum(b.numel() * _dtype_bits(b.dtype) for b in buffers.values())
            weights += codes.numel()
        for name, parameter in module.named_parameters(recurse=False):
            if name not in compressed and parameter.numel():
                bits += parameter.numel() * _dtype_bits(parameter.dtype)
                weights += parameter.numel()
    return bits, weights


def _dtype_bits(dtype: torch.dtype) -> int:
    named = {torch.uint4: 4, torch.int4: 4, torch.uint2: 2, torch.uint1: 1}
    if dtype in named:
        return named[dtype]
    return torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits


@contextlib.contextmanager
def room_for_weights(store: str | Path | None) -> Iterator[None]:
    """A full disk under the weight store (`$TMPDIR`) refused by its folder, with what to
    do (safetensors says only "I/O error: No space left on device")."""
    try:
        yield
    except Exception as error:
        if store is None or "No space left on device" not in str(error):
            raise
        raise OSError(
            f"no space left in {Path(store).parent} for the compressed weights (they are "
            "memory-mapped from $TMPDIR while the export runs): free space there, or set "
            "TMPDIR to a folder with room"
        ) from None
