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
|                | min-value formulation, fp16 scales and         | of 32           |             |
|                | minimums (Apple's Qwen3.5 preset)              |                 |             |
| int4-block64   | the same per block of 64 inputs                | uint4 per block | uint4       |
| palettize4     | 16-entry LUT per group of 32 output channels   | fp32            | LUT if      |
|                | (Apple's Gemma 4 preset; Gemma 4's per-layer   | (as Apple's)    | untied      |
|                | input gate / projection get 256-entry LUTs)    |                 |             |

Experts stored stacked (`zoo.core.model.experts.StackedExperts`, GPT-OSS) are compressed stacked:
per expert and output column, blocks of 32 inputs (int4-block32) or all of them (int8). A
mixture's router stays float32 under every preset. How each module is stored through
coreai-opt is in `zoo.core.compression.stores`.

`gptq:int4-block32` and `gptq:int4-block64` (`calibrated`) store the same grids with codes
chosen by GPTQ on calibration text (`zoo.core.compression.gptq`): the same asset, better codes; they
need the text (`load(..., calibration=windows)`, `zoo export --calibration FILE`).

A tied head reads the embedding table: compressed with it by int8 and int4-block32. A table
whose width does not divide into blocks of 32 is left as it is (coreai-opt says so). Weight
compression keeps `nn.Linear` / `nn.Embedding` modules, so those presets export with the
weights layout "linear" (`zoo.core.model.layout`); the keys layout is unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from zoo.core.compression.stores import (
    AsFloat32,
    Choice,
    Holder,
    compressor_for,
    fp16_pass,
    int4_block32,
    int4_blocks,
    int8_per_channel,
    lut_or_table,
    palettize4_groups,
    palettize8_per_tensor,
    projection_or_table,
    quiet_imports,
    room_for_weights,
)


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    # (our module name, module) -> how to store that module's weight, or None: as it is
    weights: Callable[[str, nn.Module], Choice | None] | None = None
    # rewrites each torch.export program before conversion (the fp16 cast)
    program_pass: Callable | None = None
    # zoo model name -> why this preset cannot export it
    unsupported: tuple[tuple[str, str], ...] = ()
    # the dtype of the scales (and offsets) the weights are stored with: coreai-opt gives
    # them the weight's dtype, so an fp16 scale means compressing an fp16 copy of the
    # module; its dequantized weight is cast back to fp32 for the fp32 graph
    scale_dtype: torch.dtype = torch.float32
    # what a mixed preset chose, as metadata and pages show it (`mixed`)
    detail: str | None = None
    units: tuple[str, ...] = ()  # the module names (or prefixes) a mixed preset stores int8
    calibrated: bool = False  # codes chosen by GPTQ on calibration text (`calibrated`)

    @property
    def compresses_weights(self) -> bool:
        return self.weights is not None

    @property
    def spelling(self) -> str:
        """The name `get_preset` takes back: `mixed:UNIT,...` for a mixed preset."""
        return f"{self.name}:{','.join(self.units)}" if self.name in MIXED_KINDS else self.name

    def check_calibration(self, windows) -> None:
        if self.calibrated and not windows:
            raise ValueError(
                f"--compress {self.name} chooses its codes on calibration text: give it some "
                "(zoo export --calibration FILE.txt, or load(..., calibration=[ids, ...])), "
                "text unlike what you will measure it on"
            )

    def check(self, model_name: str) -> None:
        reason = dict(self.unsupported).get(model_name)
        if reason:
            raise ValueError(f"--compress {self.name} cannot export {model_name}: {reason}")

    def weight_bits(self, name: str, module: nn.Module) -> int:
        """Bits of each stored weight's code in `module` (scales and LUTs not counted, as
        Apple's "bits per weight" column counts them)."""
        choice = self.weights(name, module) if self.weights else None
        if choice is not None:
            return choice[2]
        return 16 if self.program_pass is fp16_pass else 32

    def bits_per_weight(self, model: nn.Module) -> float:
        """Mean code bits over a model's projections and embedding tables (a tied head
        counted once: it is the table)."""
        total = bits = 0
        for name, module in model.named_modules():
            if name and projection_or_table(module):
                total += module.weight.numel()
                bits += module.weight.numel() * self.weight_bits(name, module)
        return bits / total

    def check_range(self, model: nn.Module) -> None:
        """fp16 holds magnitudes up to 65,504: a weight past it would become inf, and the
        asset decode nonsense. Refused, naming the tensor, before the conversion."""
        if self.name != "fp16":
            return
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if tensor.is_floating_point() and tensor.numel() and not tensor.is_meta:
                peak = float(tensor.detach().abs().max())
                if peak > torch.finfo(torch.float16).max:
                    raise ValueError(
                        f"--compress fp16: {name} holds {peak:.4g}, past fp16's largest "
                        "value (65504); export with fp32, int8 or int4-block32"
                    )

    def check_units(self, model: nn.Module) -> None:
        """Every unit a mixed preset names is a module of `model` (a typo would store the
        whole model 4-bit without a word)."""
        names = [name for name, _ in model.named_modules() if name]
        missing = [u for u in self.units if not any(_under(n, u) for n in names)]
        if missing:
            tops = [n for n in names if n.count(".") == 0] + ["layers.0", "layers.1", "..."]
            raise ValueError(
                f"--compress {self.name}: no module {', '.join(missing)} in this model; its "
                f"units are {', '.join(dict.fromkeys(tops))} (python -m zoo.quality NAME "
                "--sweep chooses them for a real model)"
            )

    def layout(self, layout: dict[str, str]) -> dict[str, str]:
        """Weight compression acts on `nn.Linear` modules: keep them as authored."""
        return {**layout, "weights": "linear"} if self.weights else layout

    def compress_module(
        self, name: str, module: nn.Module, store: str | Path | None = None
    ) -> nn.Module:
        """`module` with its weight stored as this preset says (itself if it says nothing).
        Each module is compressed on its own, so a model can be compressed while it loads
        (`zoo.core.checkpoint.weights.build_and_load`); coreai-opt gives the same numbers as on the
        whole model. With `store`, the compressed weights are written under it and
        memory-mapped (coreai-opt's `mmap_dir`): they leave this process's memory."""
        if self.weights is None or parametrize.is_parametrized(module):
            return module
        if any(p.is_meta for p in module.parameters(recurse=False)):
            return module  # not read: another layer range's (zoo.core.export.stream)
        quiet_imports()  # before the first coreai-opt import (in `weights`)
        choice = self.weights(name, module)
        if choice is None:
            return module
        kind, config, _ = choice
        compressed_states = getattr(module, "COMPRESSED", ("weight",))  # StackedExperts: two
        stacked = compressed_states != ("weight",)
        half = self.scale_dtype != torch.float32 and (
            stacked or getattr(module, "bias", None) is None
        )
        if half:  # the weights only: biases stay in the graph's fp32
            for state in compressed_states:
                setattr(module, state, nn.Parameter(getattr(module, state).half(), False))
        dtype = getattr(module, compressed_states[0]).dtype
        holder = Holder(module)
        if stacked:
            example = module.example_input(dtype)
        elif isinstance(module, nn.Linear):
            example = torch.zeros(1, module.in_features, dtype=dtype)
        else:
            example = torch.zeros(1, dtype=torch.long)
        mmap_dir = None if store is None else str(Path(store) / (name or "model"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # coreai-opt's notes on untested torch versions
            compressor = compressor_for(kind, config, type(module))(holder)
            compressor.prepare(example)
            with room_for_weights(store):
                compressed = compressor.finalize(mmap_dir=mmap_dir).inner.eval()
        if half and not parametrize.is_parametrized(compressed):
            return compressed.float()  # coreai-opt left it alone (e.g. a width not of 32s)
        for state in compressed_states if half else ():  # the graph computes in fp32
            parametrize.register_parametrization(compressed, state, AsFloat32(), unsafe=True)
        return compressed

    def apply(self, model: nn.Module, store: str | Path | None = None) -> nn.Module:
        """Compress every module of a loaded `model` the preset names, in place."""
        from zoo.core.checkpoint.weights import replace_module

        for name, module in list(model.named_modules()):
            if name:  # a bare nn.Linear is compressed through compress_module itself
                replace_module(model, name, self.compress_module(name, module, store))
        return model.eval()


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
            program_pass=fp16_pass,
            unsupported=(("qwen3_5", FP16_GATED_DELTA),),
        ),
        Preset("int8", "int8 weights per output channel (symmetric)", int8_per_channel),
        Preset(
            "int4-block32",
            "uint4 weights per block of 32 inputs, asymmetric, fp16 scales (Apple's Qwen3.5 "
            "default)",
            int4_block32,
            scale_dtype=torch.float16,
        ),
        Preset(
            "palettize4",
            "4-bit LUT per group of 32 output channels (Apple's Gemma 4 default)",
            palettize4_groups,
        ),
    )
}


@dataclass(frozen=True)
class MixedKind:
    """A family of mixed presets: every unit stored by `rest`, the units a sweep promotes
    (`zoo.quality.sweep`) by `promoted`, spelled `NAME:UNIT,UNIT`."""

    name: str
    rest: Callable[[str, nn.Module], Choice | None]
    promoted: Callable[[str, nn.Module], Choice | None]
    stored: str  # "{listed}": what the preset stores, as `zoo list` and pages say it
    detail: str  # "{listed}": the same in a line of the asset's metadata
    budget: float  # code bits per weight the sweep may spend (Apple's column: codes only)


MIXED_KINDS = {
    kind.name: kind
    for kind in (
        MixedKind(
            "mixed",
            int4_block32,
            int8_per_channel,
            "uint4 per block of 32 (int4-block32), int8 per channel for: {listed}",
            "int8: {listed}; the rest int4-block32",
            5.0,
        ),
        # Apple's iOS-style mixed 4/8-bit palettization (apple/coreai-models, SmolLM2's
        # README): 16-entry LUTs, 256-entry ones for the units its sweep chose
        MixedKind(
            "mixed-palettized",
            lut_or_table(palettize4_groups, int4_block32),
            lut_or_table(palettize8_per_tensor, int8_per_channel),
            "16-entry LUT per 32 output channels, one 256-entry LUT a projection for: "
            "{listed}; embedding tables int4-block32 (int8 if named)",
            "256-entry LUTs (int8 tables): {listed}; the rest 16-entry LUTs, int4-block32 tables",
            4.5,
        ),
    )
}


def mixed(eight_bit: Sequence[str], kind: str = "mixed") -> Preset:
    """A preset of family `kind` (`MIXED_KINDS`) with the modules under `eight_bit` (names
    or prefixes: "embed_tokens", "layers.3") stored 8-bit: the preset `zoo.quality.sweep`
    chooses. `mixed`: int4-block32, int8 per channel where named; `mixed-palettized`:
    4-bit LUTs, 8-bit LUTs where named."""
    units, family = tuple(eight_bit), MIXED_KINDS[kind]

    def weights(name: str, module: nn.Module) -> Choice | None:
        if any(_under(name, unit) for unit in units):
            return family.promoted(name, module)
        return family.rest(name, module)

    listed = ", ".join(units) if units else "nothing"
    return Preset(
        kind,
        family.stored.format(listed=listed),
        weights,
        scale_dtype=torch.float16,
        detail=family.detail.format(listed=listed),
        units=units,
    )


# Spelled like a preset, measured by the evaluation (zoo.evaluation), not in every table the
# presets fill: int4-block32's code with blocks of 64 (4.5 bits a weight with its scales)
VARIANTS = {
    "int4-block64": Preset(
        "int4-block64",
        "uint4 weights per block of 64 inputs, asymmetric, fp16 scales (4.5 bits a weight)",
        int4_blocks(64),
        scale_dtype=torch.float16,
    ),
}
CALIBRATED_BASES = ("int4-block32", "int4-block64")


def calibrated(base: str) -> Preset:
    """`base`'s grid (its scales and minimums searched, `zoo.core.compression.gptq.search_grid`)
    with codes chosen by GPTQ on calibration text: `gptq:int4-block64`."""
    if base not in CALIBRATED_BASES:
        raise ValueError(
            f"--compress gptq:{base}: GPTQ chooses codes of {' or '.join(CALIBRATED_BASES)}"
        )
    preset = {**PRESETS, **VARIANTS}[base]
    return Preset(
        f"gptq:{base}",
        f"{preset.summary}; codes chosen by GPTQ on calibration text",
        preset.weights,
        scale_dtype=preset.scale_dtype,
        calibrated=True,
    )


def _under(name: str, unit: str) -> bool:
    return name == unit or name.startswith(unit + ".")


# every spelling `get_preset` takes beside `PRESETS`, as the CLI and the index page list them
_GPTQ = "gptq:" + "|".join(CALIBRATED_BASES).replace("|int4-block", "|")  # int4-block32|64
OTHER_SPELLINGS = (*VARIANTS, *(f"{kind}:UNITS" for kind in MIXED_KINDS), _GPTQ)


MIXED_HELP = (
    "mixed:UNIT,UNIT,... stores those modules int8 and the rest int4-block32, e.g. "
    "mixed:embed_tokens,layers.0; mixed-palettized:UNIT,... gives them 256-entry LUTs and "
    "the rest 16-entry ones (python -m zoo.quality NAME --sweep chooses them)"
)


def get_preset(name: str | Preset) -> Preset:
    """A preset by name (`PRESETS`), or a `Preset` built elsewhere (`mixed`) as it is."""
    if isinstance(name, Preset):
        return name
    if isinstance(name, str) and name.split(":")[0] in MIXED_KINDS:
        units = [unit.strip() for unit in name.partition(":")[2].split(",") if unit.strip()]
        if not units:
            raise ValueError(f"--compress {name!r} names no module: {MIXED_HELP}")
        return mixed(units, name.split(":")[0])
    if isinstance(name, str) and name.startswith("gptq:"):
        return calibrated(name.removeprefix("gptq:"))
    if name in VARIANTS:
        return VARIANTS[name]
    if name not in PRESETS:
        raise ValueError(
            f"unknown compression preset {name!r}; choose one of {list(PRESETS)}, "
            f"{', '.join(VARIANTS)}, mixed:UNIT,..., mixed-palettized:UNIT,... or "
            f"gptq:{'|'.join(CALIBRATED_BASES)}"
        )
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
