"""The options of an export, declared once: name, default, type, help, the command line's
spelling. `zoo export`'s arguments (`add_export_options`), the keywords `plan_export`,
`zoo.export` and `export_model` take (`export_options`: unknown ones refused, defaults
filled in), and their documentation (`keywords_doc`) are all made from `EXPORT_OPTIONS`:
an option added here is an option everywhere.

Importing this module imports no torch: the choices that list torch-side things (presets,
strategies, layouts) are read when the parser is built, for `export` only.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# -- option types: ASCII digits only (int() would also read "١٢", "１２" and "1_0") --------


def whole_number(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"\s*-?[0-9]+\s*", text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def layers_per_function(text: str) -> int:
    """A whole number >= 1, or `ane`: the most layers a Neural Engine compile is reported
    to take (`zoo.core.export.ranges.NEURAL_ENGINE_LAYERS`)."""
    from zoo.core.export.ranges import NEURAL_ENGINE_LAYERS

    return NEURAL_ENGINE_LAYERS if text.strip().lower() == "ane" else whole_number(1)(text)


def spans(text: str) -> list[int]:
    """`128,512` -> [128, 512] (checked against the chunk and capacity by the plan)."""
    return [whole_number(1)(piece.strip()) for piece in text.split(",")]


def verify_widths(text: str) -> list[int]:
    """`4,8` -> [4, 8]: verify calls of 4 and of 8 tokens, 2 or more each."""
    return sorted({whole_number(2)(piece.strip()) for piece in text.split(",")})


def preset_name(text: str) -> str:
    """A preset's name, or mixed:UNIT,... (checked against the model by the plan)."""
    from zoo.core.compression.presets import get_preset

    try:
        get_preset(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


# -- the declarations ---------------------------------------------------------------------


@dataclass(frozen=True)
class ExportOption:
    """One export option. `name` is the Python keyword; the command line spells it
    `--name-with-dashes` unless `flag` says otherwise; `cli=False`: Python only (the command
    line has another way to say it), `python=False`: the command line only. `model=False`:
    decided by the checkpoint, so `export_model` (a model already loaded) does not take it.
    `choices` may be a function (the list is read when the parser is built)."""

    name: str
    default: Any
    help: str
    flag: str | None = None
    parse: Callable[[str], Any] | None = None
    choices: tuple | Callable[[], tuple] | None = None
    metavar: str | None = None
    cli: bool = True
    python: bool = True
    model: bool = True

    @property
    def spelled(self) -> str:
        return self.flag or f"--{self.name.replace('_', '-')}"


def _strategies() -> tuple[str, ...]:
    from zoo.core.asset.kv_writes import STRATEGIES

    return tuple(n for n, s in STRATEGIES.items() if s.stateful and s.chunks)


def _presets_metavar() -> str:
    from zoo.core.compression.presets import OTHER_SPELLINGS, PRESETS

    return "{" + ",".join((*PRESETS, *OTHER_SPELLINGS)) + "}"


def _chunk_help() -> str:
    """tokens per prefill call (default: this platform's, `zoo.core.model.layout.DEFAULT_CHUNK`;
    at most the capacity)"""
    from zoo.core.model.layout import DEFAULT_CHUNK

    chunks = ", ".join(f"{n} on {p}" for p, n in DEFAULT_CHUNK.items())
    return f"tokens per prefill call (default: {chunks}, at most the capacity)"


def _weight_layouts() -> tuple[str, ...]:
    from zoo.core.model.layout import WEIGHT_LAYOUTS

    return ("auto", *WEIGHT_LAYOUTS)


def _key_layouts() -> tuple[str, ...]:
    from zoo.core.model.layout import KEY_LAYOUTS

    return ("auto", *KEY_LAYOUTS)


def _kv_caches() -> tuple[str, ...]:
    from zoo.core.asset.decode_spec import KV_CACHES

    return tuple(KV_CACHES)


EXPORT_OPTIONS: tuple[ExportOption, ...] = (
    ExportOption("overwrite", False, "replace an asset the zoo wrote"),
    ExportOption(
        "text_only",
        False,
        "the text decoder alone: leave out a multimodal checkpoint's encoders (vision, "
        "audio; docs/guides/multimodal.md)",
        model=False,
    ),
    ExportOption(
        "image_tokens",
        None,
        "the most soft tokens an image becomes, the vision function's fixed size: larger "
        "images are resized smaller, as the processor does with that budget (default: the "
        "processor's own, at most 1024; Gemma 4: 70, 140, 280, 560 or 1120)",
        parse=whole_number(1),
        metavar="N",
        model=False,
    ),
    ExportOption(
        "audio_tokens",
        None,
        "the most soft tokens an audio clip becomes (one every 40 ms), the audio function's "
        "fixed size: longer clips are refused (default: the processor's own, 750: 30 s)",
        parse=whole_number(1),
        metavar="N",
        model=False,
    ),
    ExportOption(
        "target",
        "zoo",
        "zoo: prefill + decode for `generate`; apple-engine: a bundle in the contract "
        "Apple's macOS engine reads (docs/guides/apple-recipes.md)",
        choices=("zoo", "apple-engine"),
        model=False,
    ),
    ExportOption(
        "model_id", None, "apple-engine: the hub name recorded as the bundle's source", model=False
    ),
    ExportOption("strategy", "runtime-index", "KV writes", choices=_strategies, model=False),
    ExportOption("capacity", 256, "tokens the KV cache holds", parse=whole_number(2), model=False),
    ExportOption("chunk", None, _chunk_help, parse=whole_number(2)),
    ExportOption(
        "layers_per_function",
        None,
        "the decoder as layer ranges of at most N layers, one function each; 'ane' = 8 "
        "(docs/performance.md#layer-ranges)",
        parse=layers_per_function,
        metavar="N|ane",
    ),
    ExportOption(
        "spans",
        None,
        "also prefill over the cache's first N, M, ... columns "
        "(docs/performance.md#attention-spans)",
        parse=spans,
        metavar="N,M,...",
    ),
    ExportOption(
        "compress",
        "fp32",
        "how the weights are stored (docs/guides/compression.md)",
        parse=preset_name,
        metavar=_presets_metavar,
    ),
    ExportOption(
        "encoding",
        "coreai-opt",
        "how compressed weights are written: coreai-opt's ops (Macs); plain: the same codes "
        "expanded by ordinary ops, bit-identical weights; plain-fp32: the same in float32 "
        "arithmetic (within half an fp16 step); both decode faster on this Linux CPU runtime, "
        "an int4 asset twice the size (docs/guides/compression.md#encodings)",
        choices=("coreai-opt", "plain", "plain-fp32"),
    ),
    ExportOption(
        "verify",
        None,
        "add verify functions: K tokens in, the logits after each out, one per K "
        "(speculative decoding: zoo generate --speculate; docs/performance.md)",
        parse=verify_widths,
        metavar="K[,K...]",
        python=False,  # Python: score_chunk (the widest) and verify_widths
    ),
    ExportOption(
        "score_chunk",
        None,
        "a `score` function of this many tokens, every row's logits out (zoo.quality; "
        "the widest verify width)",
        cli=False,
    ),
    ExportOption(
        "verify_widths",
        None,
        "narrower verify functions beside `score` (speculative decoding)",
        cli=False,
    ),
    ExportOption(
        "first_layers",
        None,
        "export only the first N decoder layers, then the final norm and head: an early "
        "exit that drafts for the whole model (zoo generate --speculate draft:ASSET)",
        parse=whole_number(1),
        metavar="N",
        model=False,
    ),
    ExportOption(
        "kv_cache",
        "fp32",
        "how the KV cache is stored: int8 holds a position in about a quarter of the bytes, "
        "each head's row quantized with its own scale (docs/guides/compression.md)",
        choices=_kv_caches,
    ),
    ExportOption(
        "calibration",
        None,
        "text a gptq: preset chooses its codes on (its first 16k tokens; not the text you "
        "will measure on)",
        parse=Path,
        metavar="FILE.txt",
        model=False,
    ),
    ExportOption(
        "sidecar",
        "auto",
        "lookup tables read a row per token (Gemma 4's per-layer embeddings) as int8 files "
        "beside the program (auto: when --compress compresses the weights)",
        choices=("auto", "on", "off"),
        model=False,
    ),
    ExportOption(
        "experts",
        "auto",
        "mixtures of experts: compute the chosen experts only (GatherMM) or all of them, "
        "weighted (auto: all in the blocked weights layout, Linux's when uncompressed, where "
        "it measured faster; chosen otherwise)",
        choices=("auto", "chosen", "all"),
    ),
    ExportOption(
        "stream",
        "auto",
        "export range by range, each layer range read, compressed and written before the "
        "next (peak memory: the largest range, not the model; auto: when the model would not "
        "fit in half this machine's memory)",
        choices=("auto", "on", "off"),
        model=False,
    ),
    ExportOption(
        "weights",
        "auto",
        "projection weights as stored (auto: this platform's, docs/performance.md)",
        flag="--weights-layout",
        choices=_weight_layouts,
    ),
    ExportOption(
        "keys",
        "auto",
        "key cache [B,H,T,D] (bhtd) or transposed (bhdt) (auto: this platform's)",
        flag="--keys-layout",
        choices=_key_layouts,
    ),
)
OPTIONS_BY_NAME = {option.name: option for option in EXPORT_OPTIONS}


def _read(value):
    return value() if callable(value) else value


def add_export_options(parser: argparse.ArgumentParser) -> None:
    """Every declared option the command line has, as `parser` arguments."""
    for option in EXPORT_OPTIONS:
        if not option.cli:
            continue
        if option.default is False:
            parser.add_argument(option.spelled, action="store_true", help=option.help)
            continue
        parser.add_argument(
            option.spelled,
            dest=option.name,
            default=option.default,
            type=option.parse,
            choices=_read(option.choices),
            metavar=_read(option.metavar),
            help=_read(option.help),
        )


def options_of_args(args: argparse.Namespace) -> dict[str, Any]:
    """The Python keywords of the command line's options (`--verify 4,8`: `score_chunk=8`,
    `verify_widths=[4]`)."""
    options = {o.name: getattr(args, o.name) for o in EXPORT_OPTIONS if o.cli and o.python}
    widths = getattr(args, "verify", None)
    options["score_chunk"] = widths[-1] if widths else None  # the widest: `score`
    options["verify_widths"] = widths[:-1] if widths else None
    return options


def export_options(given: dict[str, Any], where: str, model: bool = False) -> dict[str, Any]:
    """`given` keywords completed with the declared defaults; a keyword no option declares
    (or, for a loaded `model`, one the checkpoint decides) is refused, naming the ones
    there are."""
    known = {o.name for o in EXPORT_OPTIONS if o.python and (o.model or not model)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(
            f"{where} got unexpected keyword{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
            f"its options: {', '.join(sorted(known))}"
        )
    return {
        o.name: given.get(o.name, o.default)
        for o in EXPORT_OPTIONS
        if o.python and (o.model or not model)
    }


def keywords_doc(model: bool = False) -> str:
    """The keywords' documentation, made from the declarations (appended to docstrings)."""
    lines = ["", "Options (keywords, declared in `zoo.core.export.options.EXPORT_OPTIONS`):"]
    for o in EXPORT_OPTIONS:
        if o.python and (o.model or not model):
            default = "" if o.default in (None, False) else f" (default {o.default!r})"
            # a help made when the parser is built says what it computes in its docstring
            said = o.help if isinstance(o.help, str) else " ".join(o.help.__doc__.split())
            lines.append(f"- `{o.name}`{default}: {said}")
    return "\n    ".join(lines) + "\n"


def calibration_file(compress: str, calibration: str | os.PathLike | None) -> Path | None:
    """The calibration text a calibrated preset needs, checked; refused for another."""
    from zoo.core.compression.presets import get_preset

    preset = get_preset(compress)
    if calibration is None:
        preset.check_calibration(None)
        return None
    if not preset.calibrated:
        raise ValueError(
            f"--calibration is for a calibrated preset (gptq:int4-block64, ...), not "
            f"--compress {compress}"
        )
    path = Path(calibration)
    if not path.is_file():
        raise ValueError(f"--calibration {path}: no such file (a UTF-8 text file)")
    return path
