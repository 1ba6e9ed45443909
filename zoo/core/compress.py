"""Compression presets: how an export stores a decoder's weights, through Apple's coreai-opt.

One list for every zoo model; `export_model(..., compress=NAME)` and the CLI's
`--compress NAME` pick one, and the asset's DecodeSpec records it. Each preset says what it
does to the projections, the embedding table and the LM head:

| preset         | projections (`nn.Linear`)                      | embeddings      | LM head     |
|----------------|------------------------------------------------|-----------------|-------------|
| fp32           | as loaded                                      | fp32            | fp32        |
| fp16           | fp16 weights and compute (coreai-opt cast)     | fp16            | fp16        |
| int8           | int8 per output channel, symmetric             | int8 per row    | int8        |
| int4-block32   | uint4 per block of 32 inputs, asymmetric,      | uint4 per block | uint4       |
|                | min-value formulation (Apple's Qwen3.5 preset) | of 32           |             |
| palettize4     | 16-entry LUT per group of 32 output channels   | fp32            | LUT if      |
|                | (Apple's Gemma 4 preset; Gemma 4's per-layer   | (as Apple's)    | untied      |
|                | input gate / projection get 256-entry LUTs)    |                 |             |

A tied head reads the embedding table: compressed with it by int8 and int4-block32. A table
whose width does not divide into blocks of 32 is left as it is (coreai-opt says so). Weight
compression keeps `nn.Linear` / `nn.Embedding` modules, so those presets export with the
weights layout "linear" (`zoo.core.layout`); the keys layout is unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

LINEAR = "torch.nn.modules.linear.Linear"
EMBEDDING = "torch.nn.modules.sparse.Embedding"


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    # (model, example forward arguments) -> the compressed model, or None: unchanged
    compress_weights: Callable[[nn.Module, tuple], nn.Module] | None = None
    # rewrites each torch.export program before conversion (the fp16 cast)
    program_pass: Callable | None = None
    # zoo model name -> why this preset cannot export it
    unsupported: tuple[tuple[str, str], ...] = ()

    def check(self, model_name: str) -> None:
        reason = dict(self.unsupported).get(model_name)
        if reason:
            raise ValueError(f"--compress {self.name} cannot export {model_name}: {reason}")

    def layout(self, layout: dict[str, str]) -> dict[str, str]:
        """Weight compression acts on `nn.Linear` modules: keep them as authored."""
        return {**layout, "weights": "linear"} if self.compress_weights else layout

    def apply(self, model: nn.Module, spec) -> nn.Module:
        if self.compress_weights is None:
            return model
        from zoo.core.decode import FlatDecoder, example_inputs

        _quiet_imports()
        _, arguments = example_inputs(spec, spec.chunk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # coreai-opt's notes on untested torch versions
            # coreai-opt calls the module with positional tensors: the flat form
            compressed = self.compress_weights(FlatDecoder(model, spec), arguments)
        return compressed.model.eval()


def _quiet_imports() -> None:
    """torchao (imported by coreai-opt) logs CUDA kernels it cannot load and torch notes on
    its enums at import: nothing a reader of this CPU build can act on."""
    import logging

    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _quantize(module_config) -> Callable[[nn.Module, tuple], nn.Module]:
    def compress(model: nn.Module, arguments: tuple) -> nn.Module:
        from coreai_opt.quantization import ExecutionMode, Quantizer, QuantizerConfig

        config = QuantizerConfig(
            global_config=None,  # only what is named below: norms, RoPE, SDPA stay as they are
            # the embedding tables too: a tied head reads the same (dequantized) table, and
            # a 248k-row table is a third of a small model
            module_type_configs={LINEAR: module_config(), EMBEDDING: module_config()},
            execution_mode=ExecutionMode.EAGER,
        )
        quantizer = Quantizer(model, config)
        quantizer.prepare(arguments)
        return quantizer.finalize()

    return compress


def _int8():
    from coreai_opt.quantization import ModuleQuantizerConfig

    return ModuleQuantizerConfig.presets.w8()


def _int4_block32():
    from coreai_opt.quantization import ModuleQuantizerConfig, QuantizationSpec
    from coreai_opt.quantization.spec import (
        PerBlockGranularity,
        QuantizationFormulation,
        QuantizationScheme,
    )

    weight = QuantizationSpec(
        dtype=torch.uint4,
        qscheme=QuantizationScheme.ASYMMETRIC,
        qformulation=QuantizationFormulation.MINVAL,
        granularity=PerBlockGranularity(axis=1, block_size=32),
    )
    return ModuleQuantizerConfig(
        op_input_spec=None, op_output_spec=None, op_state_spec={"weight": weight}
    )


def _palettize4(model: nn.Module, arguments: tuple) -> nn.Module:
    from coreai_opt.palettization import (
        KMeansPalettizer,
        KMeansPalettizerConfig,
        ModuleKMeansPalettizerConfig,
    )

    eight_bit = ModuleKMeansPalettizerConfig.presets.w8()  # per tensor
    config = KMeansPalettizerConfig(
        global_config=None,
        module_type_configs={LINEAR: ModuleKMeansPalettizerConfig.presets.w4(group_size=32)},
        # Gemma 4's per-layer-embedding gate and projection: 8 bits, as Apple's preset
        module_name_configs={
            r".*per_layer_input_gate": eight_bit,
            r".*per_layer_projection": eight_bit,
        },
    )
    palettizer = KMeansPalettizer(model, config)
    palettizer.prepare(arguments)
    return palettizer.finalize()


def _fp16_pass(program):
    from coreai_opt.casting import cast_fp32_to_fp16

    return cast_fp32_to_fp16(program)


# coreai-opt 0.4.0's fp16 cast on a graph with GatedDeltaNet's prefill loop (a `while_loop`):
# the loop's carried state comes back fp32 from the cast body ("'coreai.while' op along
# control flow edge ... 'tensor<...xf32>' should match input type ... 'tensor<...xf16>'"),
# and keeping the loop (or everything but the matmuls) fp32 through `ignored_ops` loses
# the state outputs ("8 state inputs but 0 state outputs"). snippets/compression.py runs it.
FP16_GATED_DELTA = (
    "coreai-opt 0.4.0's fp16 cast fails on the GatedDeltaNet prefill loop "
    "(docs/guides/compression.md#fp16-and-gateddeltanet); use int8, int4-block32 or palettize4"
)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("fp32", "fp32 weights and compute, as loaded"),
        Preset(
            "fp16",
            "fp16 weights and compute (coreai-opt's fp32->fp16 cast)",
            program_pass=_fp16_pass,
            unsupported=(("qwen3_5", FP16_GATED_DELTA),),
        ),
        Preset("int8", "int8 weights per output channel (symmetric)", _quantize(_int8)),
        Preset(
            "int4-block32",
            "uint4 weights per block of 32 inputs, asymmetric (Apple's Qwen3.5 default)",
            _quantize(_int4_block32),
        ),
        Preset(
            "palettize4",
            "4-bit LUT per group of 32 output channels (Apple's Gemma 4 default)",
            _palettize4,
        ),
    )
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown compression preset {name!r}; choose one of {list(PRESETS)}")
    return PRESETS[name]


def quality(reference: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    """How far `logits` `[T, vocab]` are from the fp32 `reference`, position by position:
    max abs error, mean cosine similarity, mean KL(reference || logits) in nats, top-1
    agreement."""
    reference, logits = (np.asarray(a, np.float64) for a in (reference, logits))

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    p_log, q_log = log_softmax(reference), log_softmax(logits)
    kl = (np.exp(p_log) * (p_log - q_log)).sum(-1)
    cosine = (reference * logits).sum(-1) / (
        np.linalg.norm(reference, axis=-1) * np.linalg.norm(logits, axis=-1)
    )
    return {
        "positions": int(reference.shape[0]),
        "max abs error": float(np.abs(reference - logits).max()),
        "cosine": float(cosine.mean()),
        "KL (nats)": float(kl.mean()),
        "top-1 agreement": float((reference.argmax(-1) == logits.argmax(-1)).mean()),
    }
