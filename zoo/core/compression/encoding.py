"""How compressed weights are written into the graph: coreai-opt's encoding, or "plain".

A coreai-opt preset (`zoo.core.compression.presets`) stores a projection's integer codes with a
scale and an offset per block, and the graph expands them with `constexpr_blockwise_shift_scale`
on every call. On the Linux CPU runtime that op is most of a compressed projection's time
(bench-compressed-decode: int4-block32 233 ms a call against fp32's 26 ms at 4096 x 1024,
`blockwise_shift_scale` 83 %), while the same codes expanded by ordinary ops, one code a
byte in the layout the matmul reads, took 7 ms (`zoo.lab.encodings`).

`--encoding plain` keeps what the preset chose (the very codes, scales, minimums or zero
points) and writes them as ordinary tensors: codes `[in, out]`, one a byte, uint8 or int8;
scales and offsets `[blocks, out]` in the preset's dtype. The graph computes the preset's
own formula (`scale * (code - zero_point)`, or `scale * (code - q_min) + minval`) in the
same dtype, so the weights it expands are bit-identical to coreai-opt's (tested). The cost:
4-bit codes take a byte each, so an int4 asset is about twice coreai-opt's size. Tables
(embeddings) are stored `[rows, columns]` and a token's row is expanded after its lookup.
A head tied to the table gets its own copy of the codes, `[in, out]`: expanding the whole
table on every call would cost more than the head's matmul. Palettized weights (LUTs) and
stacked experts keep coreai-opt's encoding.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

# coreai-opt's ops; plain codes with the preset's roundings (bit-identical weights); plain
# codes in float32 arithmetic (each weight within half a unit of the scale dtype's last place
# of coreai-opt's, which rounds q * s and then + m in fp16)
ENCODINGS = ("coreai-opt", "plain", "plain-fp32")
# the presets that store integer codes with scales (the others: floats, or LUTs)
PLAIN_PRESETS = ("int8", "int4-block32", "int4-block64", "mixed")


def _dequantizer(module: nn.Module):
    """(the WeightDequantizeModule, whether a cast to float32 follows it) of a module whose
    weight coreai-opt stored as integer codes; None for anything else (a LUT, a float)."""
    if not parametrize.is_parametrized(module, "weight"):
        return None
    from coreai_torch._compression.custom_layers import WeightDequantizeModule

    chain = list(module.parametrizations.weight)
    first = chain[0]
    if not isinstance(first, WeightDequantizeModule) or first.quantized_data.is_floating_point():
        return None
    names = [type(p).__name__ for p in chain[1:]]
    if names not in ([], ["AsFloat32"]):
        return None
    return first, bool(names)


class PlainCodes(nn.Module):
    """Integer codes and their scale and offset, `[rows, columns]` with blocks along the
    columns (a table's rows, or a projection's inputs transposed to `[in, out]`)."""

    def __init__(self, dequantize, to_float32: bool, transpose: bool, exact: bool) -> None:
        super().__init__()
        self.exact = exact  # round as the scale's dtype rounds (bit-identical), or not

        def held(tensor):
            return None if tensor is None else (tensor.T if transpose else tensor).contiguous()

        self.transpose = transpose
        self.register_buffer("codes", held(dequantize.quantized_data))
        self.register_buffer("scale", held(dequantize.scale))
        self.register_buffer("zero_point", held(dequantize.zero_point))
        self.register_buffer("minval", held(dequantize.minval))
        self.q_min = 0
        if dequantize.minval is not None:  # coreai-opt's q_min of the logical input dtype
            from coreai_torch._compression.utils import _int_dtype_min

            self.q_min = _int_dtype_min(dequantize.input_dtype)
        self.to_float32 = to_float32

    def expand(self, codes: torch.Tensor, scale: torch.Tensor, offset) -> torch.Tensor:
        """coreai-opt's formula, in its dtype (bit-identical): `codes` `[..., rows, cols]`,
        each scale broadcast over its block (a reshape, never a repeat: a repeated scale
        would be folded into a full-size constant by the converter)."""
        shape = codes.shape
        if self.transpose:  # [in, out]: blocks of inputs along the rows
            blocks = scale.shape[-2]
            grid = codes.reshape(*shape[:-2], blocks, shape[-2] // blocks, shape[-1])

            def spread(tensor):
                return tensor.unsqueeze(-2)
        else:  # [rows, columns]: blocks along the columns
            blocks = scale.shape[-1]
            grid = codes.reshape(*shape[:-1], blocks, shape[-1] // blocks)

            def spread(tensor):
                return tensor.unsqueeze(-1)

        # float32 arithmetic, rounded to the scale's dtype after each step as coreai-opt's
        # own arithmetic in that dtype rounds: fp16 arithmetic on this CPU runtime took 130
        # ms a 4096 x 1024 call, float32 with the two casts a fraction of that. (A code
        # times an fp16 scale is exact in float32, and so is the sum with an fp16 offset of
        # the block's magnitude: each cast rounds once, as the fp16 op does.)
        dtype = scale.dtype

        def rounded(value: torch.Tensor) -> torch.Tensor:
            if dtype == torch.float32 or not self.exact:
                return value
            return value.to(dtype).float()

        codes, scale = grid.float(), spread(scale).float()
        if self.zero_point is not None:
            out = rounded((codes - spread(offset).float()) * scale)
        elif self.minval is not None:
            out = rounded(rounded((codes - self.q_min) * scale) + spread(offset).float())
        else:
            out = rounded(codes * scale)
        out = out.reshape(shape)
        return out if self.to_float32 else out.to(dtype)

    def offset(self):
        return self.zero_point if self.zero_point is not None else self.minval

    def weight(self) -> torch.Tensor:
        return self.expand(self.codes, self.scale, self.offset())


class PlainLinear(nn.Module):
    """`x @ W.T + b` with W held as plain codes `[in, out]` (the layout the matmul reads)."""

    def __init__(self, compressed: nn.Linear, dequantize, to_float32: bool, exact: bool) -> None:
        super().__init__()
        self.in_features, self.out_features = compressed.in_features, compressed.out_features
        self.stored = PlainCodes(dequantize, to_float32, transpose=True, exact=exact)
        self.bias = compressed.bias

    @property
    def weight(self) -> torch.Tensor:
        """`[out, in]`, as an nn.Linear's (what a reader of `.weight` expects)."""
        return self.stored.weight().T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.stored.weight()
        return y if self.bias is None else y + self.bias


class PlainEmbedding(nn.Module):
    """A table held as plain codes `[rows, columns]`: a token's row is looked up, then
    expanded; `.weight` (a tied head reads it) expands the whole table."""

    def __init__(self, compressed: nn.Embedding, dequantize, to_float32: bool, exact: bool) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = (
            compressed.num_embeddings,
            compressed.embedding_dim,
        )
        self.stored = PlainCodes(dequantize, to_float32, transpose=False, exact=exact)

    @property
    def weight(self) -> torch.Tensor:
        return self.stored.weight()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        stored = self.stored
        offset = stored.offset()
        return stored.expand(
            stored.codes[ids], stored.scale[ids], None if offset is None else offset[ids]
        )


def encode_plain(model: nn.Module, encoding: str = "plain") -> nn.Module:
    """Every projection and table coreai-opt stored as integer codes, re-held plain, in
    place (`model` compressed by a preset first): "plain" rounds as the preset does
    (bit-identical weights), "plain-fp32" computes in float32 (faster here)."""
    from zoo.core.checkpoint.weights import replace_module

    exact = encoding == "plain"
    table = getattr(model, "embed_tokens", None)
    tied = getattr(model, "lm_head", False) is None and table is not None
    if tied and (found := _dequantizer(table)) is not None:
        # a tied head would expand the whole table on every call: it gets its own copy of
        # the codes in the layout the matmul reads, as the float32 layouts give it one
        head = nn.Linear(table.embedding_dim, table.num_embeddings, bias=False, device="meta")
        model.lm_head = PlainLinear(head, *found, exact)
    for name, module in list(model.named_modules()):
        found = _dequantizer(module) if name else None
        if found is None:
            continue
        if isinstance(module, nn.Linear):
            replace_module(model, name, PlainLinear(module, *found, exact))
        elif isinstance(module, nn.Embedding):
            replace_module(model, name, PlainEmbedding(module, *found, exact))
    return model


def check_encoding(encoding: str, preset, engine: bool = False) -> None:
    """`--encoding plain` holds integer codes: a preset that stores none is refused, and so
    is Apple's engine bundle (its contract is coreai-opt's)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"--encoding is one of {list(ENCODINGS)}, got {encoding!r}")
    if encoding != "coreai-opt" and engine:
        raise ValueError("--target apple-engine writes coreai-opt's encoding: drop --encoding")
    if encoding != "coreai-opt" and not (preset.name in PLAIN_PRESETS or preset.calibrated):
        raise ValueError(
            f"--encoding {encoding} holds integer codes (int8, int4-block32/64, gptq:, mixed:); "
            f"--compress {preset.spelling} stores none: drop --encoding"
        )
