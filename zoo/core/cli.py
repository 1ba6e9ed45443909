"""The command line every zoo entry shares: `python -m zoo.<model> export|generate ...`."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from zoo.core.checkpoint import weight_count
from zoo.core.compress import PRESETS, get_preset
from zoo.core.export import check_destination, check_room
from zoo.core.generator import Generator
from zoo.core.kv import STRATEGIES
from zoo.core.layout import KEY_LAYOUTS, WEIGHT_LAYOUTS, default_chunk, resolve_layout
from zoo.core.quiet import runtime_chatter_hidden
from zoo.core.runtime import COMPUTE_UNITS, default_compute_unit
from zoo.core.spec import check_spans
from zoo.core.text import encode_prompt, is_bundle, load_tokenizer, tokenizer_path


def run_command(command: str, cwd: str | Path | None = None) -> str:
    """Run a command line as a reader types it (`python` is this interpreter), in `cwd`.

    Progress (stderr) is printed; the command's stdout is returned. Fails loudly.
    """
    import shlex
    import subprocess

    args = shlex.split(command)
    args[0] = sys.executable if args[0] == "python" else args[0]
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    print(done.stderr, end="")
    if done.returncode != 0:
        raise RuntimeError(f"`{command}` exited with {done.returncode}")
    return done.stdout


def say(message: str) -> None:
    """Progress goes to stderr, so stdout carries only the generated text or ids."""
    print(message, file=sys.stderr, flush=True)


def whole_number(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def layers_per_function(text: str) -> int:
    """A whole number >= 1, or `ane`: the most layers a Neural Engine compile is reported
    to take (`zoo.core.ranges.NEURAL_ENGINE_LAYERS`)."""
    from zoo.core.ranges import NEURAL_ENGINE_LAYERS

    return NEURAL_ENGINE_LAYERS if text.strip().lower() == "ane" else whole_number(1)(text)


def spans(text: str) -> list[int]:
    """`128,512` -> [128, 512] (checked against the chunk and capacity once both are known)."""
    return [whole_number(1)(piece.strip()) for piece in text.split(",")]


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not >= 0 (0: greedy)")
    return value


def token_ids(text: str) -> list[int]:
    """`2,651,6037` -> [2, 651, 6037]; anything but whole numbers is refused."""
    pieces = [p.strip() for p in text.split(",")]
    if not any(pieces):
        raise ValueError("--prompt-ids: no token ids given")
    ids = []
    for piece in pieces:
        # ASCII digits only: int() would also read "١٢", "１２" and "1_0"
        if not re.fullmatch(r"-?[0-9]+", piece):
            shown = repr(piece) if piece else "an empty id (two commas in a row?)"
            raise ValueError(f"--prompt-ids: {shown} is not a whole-number token id")
        ids.append(int(piece))
    return ids


def build_parser(model_name: str, strategies: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m zoo.{model_name}",
        description=f"Export {model_name} to a Core AI asset, and generate with it.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    commands = parser.add_subparsers(dest="command", required=True)

    export = commands.add_parser("export", help="checkpoint directory -> .aimodel")
    export.add_argument("checkpoint", type=Path, help="config.json + *.safetensors")
    export.add_argument(
        "output", type=Path, help="the .aimodel to write (a bundle folder for apple-engine)"
    )
    export.add_argument(
        "--target",
        default="zoo",
        choices=("zoo", "apple-engine"),
        help="zoo: prefill + decode for `generate` (default); apple-engine: a bundle in the "
        "contract Apple's macOS engine reads (main + prefill, packed states, dynamic context; "
        "--strategy, --chunk and --sidecar do not apply; docs/guides/apple-recipes.md)",
    )
    export.add_argument(
        "--model-id",
        default=None,
        help="apple-engine: the model's hub name, recorded as the bundle's source "
        "(default: the checkpoint folder's name)",
    )
    export.add_argument(
        "--strategy",
        default=strategies[0],
        choices=strategies,
        help="KV cache write strategy (default: %(default)s)",
    )
    export.add_argument(
        "--capacity",
        type=whole_number(2),
        default=256,
        help="tokens the KV cache holds: the longest context (default: %(default)s)",
    )
    export.add_argument(
        "--chunk",
        type=whole_number(2),
        default=None,
        help=f"tokens per prefill call (default: {default_chunk()} on this platform, at most "
        "the capacity; docs/performance.md#prefill-chunk-size)",
    )
    export.add_argument(
        "--layers-per-function",
        type=layers_per_function,
        default=None,
        metavar="N|ane",
        help="export the decoder as layer ranges of at most N layers, one function each: "
        "prefill runs two ranges at once here; 'ane' = 8, the most the Neural Engine is "
        "reported to compile (docs/performance.md#layer-ranges)",
    )
    export.add_argument(
        "--spans",
        type=spans,
        default=None,
        metavar="N,M,...",
        help="also export prefill and decode attending over the cache's first N, M, ... "
        "columns: a short context reads less of the cache (docs/performance.md#attention-spans)",
    )
    export.add_argument("--overwrite", action="store_true", help="replace an existing asset")
    export.add_argument(
        "--compress",
        default="fp32",
        type=preset_name,
        metavar="{" + ",".join(PRESETS) + ",mixed:UNITS}",
        help="how the weights are stored (default: %(default)s; docs/guides/compression)",
    )
    export.add_argument(
        "--sidecar",
        default="auto",
        choices=("auto", "on", "off"),
        help="lookup tables read one row per token (Gemma 4's per-layer embeddings) as int8 "
        "files beside the program, looked up by the host (auto: on when --compress "
        "compresses the weights; docs/guides/compression)",
    )
    export.add_argument(
        "--weights-layout",
        default="auto",
        choices=("auto", *WEIGHT_LAYOUTS),
        help="projection weights as stored (default: this platform's, see docs/performance)",
    )
    export.add_argument(
        "--keys-layout",
        default="auto",
        choices=("auto", *KEY_LAYOUTS),
        help="key cache [B,H,T,D] (bhtd) or transposed (bhdt) (default: this platform's)",
    )

    generate = commands.add_parser("generate", help="prompt -> continuation on the runtime")
    generate.add_argument("asset", type=Path)
    prompt = generate.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="text (needs a tokenizer.json)")
    prompt.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 2,651,6037")
    generate.add_argument(
        "--tokenizer", type=Path, help="tokenizer.json (default: next to the exported checkpoint)"
    )
    generate.add_argument(
        "--chat",
        action="store_true",
        help="send --prompt as one user turn through the checkpoint's chat template; "
        "generation stops at the end of the model's turn",
    )
    generate.add_argument("--max-new-tokens", type=whole_number(1), default=32)
    generate.add_argument("--temperature", type=non_negative_float, default=0.0, help="0: greedy")
    generate.add_argument("--top-k", type=whole_number(1), default=None)
    generate.add_argument("--seed", type=whole_number(0), default=None)
    generate.add_argument(
        "--compute-unit",
        default=None,
        choices=COMPUTE_UNITS,
        help="default: $ZOO_COMPUTE_UNIT, else auto",
    )
    return parser


def run(model_name: str, argv: list[str] | None = None) -> int:
    """`python -m zoo.MODEL ...` of the registered zoo entry `model_name`."""
    from zoo.core.decode import export_model
    from zoo.core.entry import get_entry

    strategies = [n for n, s in STRATEGIES.items() if s.stateful and s.chunks]
    args = build_parser(model_name, strategies).parse_args(argv)
    try:
        if args.command == "export":
            return _export(args, get_entry(model_name), export_model)
        return _generate(args)
    except KeyboardInterrupt:
        say("\ninterrupted")
        return 130
    except Exception as error:
        if args.debug:
            raise
        # One line that says what and where; --debug shows the traceback.
        kind = (
            ""
            if isinstance(error, ValueError | OSError | IndexError)
            else (f"{type(error).__name__}: ")
        )
        say(f"error: {kind}{error} (--debug for the traceback)")
        return 2


def preset_name(text: str) -> str:
    """An argparse type: a preset's name, or mixed:UNIT,... (checked against the model
    when it loads)."""
    try:
        get_preset(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def sidecar_wanted(preset, choice: str) -> bool:
    """`--sidecar on|off`, or auto: lookup tables leave the graph when the weights are
    compressed (a device build), and stay in it for an fp32/fp16 parity export."""
    return preset.compresses_weights if choice == "auto" else choice == "on"


def _export(args, entry, export) -> int:
    if args.target == "apple-engine":
        return _export_engine(args, entry)
    started = time.perf_counter()
    # Everything that can be refused is refused before the (long) load and export.
    check_destination(args.output, args.overwrite, args.checkpoint)
    if args.chunk is None:  # the platform's measured default, never past the context
        args.chunk = min(default_chunk(), args.capacity)
    if args.chunk > args.capacity:
        raise ValueError(f"--chunk {args.chunk} is longer than --capacity {args.capacity}")
    check_spans(args.spans, args.chunk, args.capacity)
    preset = get_preset(args.compress)
    if args.layers_per_function is not None:
        from zoo.core.ranges import check_splittable

        check_splittable(entry.model)
    # room for the asset, from the checkpoint's headers, before minutes of loading
    per_weight = {"fp32": 4.0, "fp16": 2.0}.get(preset.name, 1.2)
    check_room(args.output, int(weight_count(args.checkpoint) * per_weight) + (16 << 20))
    options = {}
    if entry.sidecar_option:
        options[entry.sidecar_option] = sidecar_wanted(preset, args.sidecar)
    as_loaded = f"; {args.compress} weights, module by module" if preset.compresses_weights else ""
    say(
        f"loading {args.checkpoint} ({args.strategy} KV writes, capacity {args.capacity}"
        f"{as_loaded})"
    )
    model = entry.load(
        args.checkpoint,
        args.strategy,
        args.capacity,
        compress=args.compress,
        progress=say,
        **options,
    )
    layout = resolve_layout(args.weights_layout, args.keys_layout)
    stored = preset.layout(layout)
    if args.layers_per_function is not None:
        from zoo.core.ranges import split_layers

        ranges = split_layers(len(model.layers), args.layers_per_function)
        layout["layers_per_function"] = args.layers_per_function
        say(f"{len(model.layers)} layers as {len(ranges)} ranges: {ranges}")
    if args.spans:
        layout["spans"] = args.spans
    say(
        f"exporting prefill ({args.chunk} tokens) + decode to {args.output} "
        f"(weights {args.compress}, layout {stored['weights']}, keys {stored['keys']}) ..."
    )
    path = export(
        model,
        args.output,
        chunk=args.chunk,
        overwrite=args.overwrite,
        checkpoint=args.checkpoint,
        compress=args.compress,
        **layout,
    )
    say(f"saved {path} in {time.perf_counter() - started:.1f} s")
    return 0


def _export_engine(args, entry) -> int:
    from zoo.core.engine import PackedPrefixWrite, check_bundle_destination, export_engine_bundle

    started = time.perf_counter()
    check_bundle_destination(args.output, args.overwrite, args.checkpoint)
    if args.keys_layout == "bhdt":
        raise ValueError("--target apple-engine stores keys [B, H, T, D]: drop --keys-layout")
    if args.spans or args.layers_per_function is not None:
        raise ValueError(
            "--target apple-engine has its own functions: drop --spans and --layers-per-function"
        )
    say(
        f"loading {args.checkpoint} for Apple's engine contract (context up to "
        f"{args.capacity}, {args.compress} weights)"
    )
    model = entry.load(
        args.checkpoint,
        PackedPrefixWrite(),
        args.capacity,
        compress=args.compress,
        progress=say,
    )
    weights = "linear" if args.weights_layout == "auto" else args.weights_layout
    say(f"exporting main + prefill into the bundle {args.output} ...")
    path = export_engine_bundle(
        model,
        args.output,
        args.checkpoint,
        model_id=args.model_id,
        weights=weights,
        compress=args.compress,
        overwrite=args.overwrite,
    )
    say(f"saved {path} in {time.perf_counter() - started:.1f} s")
    return 0


def _generate(args) -> int:
    if args.chat and args.prompt is None:
        raise ValueError("--chat takes the user's turn as --prompt text")
    path = tokenizer_path(args.asset, args.tokenizer) if args.prompt is not None else None
    tokenizer = load_tokenizer(path) if path is not None else None
    if tokenizer is not None:
        prompt_ids = encode_prompt(tokenizer, path.parent, args.prompt, args.chat)
    else:
        prompt_ids = token_ids(args.prompt_ids)
    say(f"loading {args.asset} (compute unit {args.compute_unit or default_compute_unit()})")
    started = time.perf_counter()
    with runtime_chatter_hidden():  # the runtime logs each function it loads
        if is_bundle(args.asset):  # run as Apple's engine is reported to (zoo.core.engine)
            from zoo.core.engine import EngineRunner

            runner = EngineRunner(args.asset, compute_unit=args.compute_unit)
        else:
            runner = Generator(args.asset, args.compute_unit)
    with runner as generator:
        say(
            f"loaded in {time.perf_counter() - started:.1f} s (weights "
            f"{generator.spec.compression}); {len(prompt_ids)} prompt tokens"
        )

        shown: list[int] = []
        printed = ""

        def show(token: int) -> None:
            # Decode everything so far and print what is new: token-by-token decoding loses
            # the spaces that tokenizers attach to the next piece.
            nonlocal printed
            shown.append(token)
            if tokenizer is None:
                print(token, end=" ", flush=True)
                return
            text = tokenizer.decode(shown)
            print(text[len(printed) :], end="", flush=True)
            printed = text

        started = time.perf_counter()
        try:
            new = generator.generate(
                prompt_ids,
                args.max_new_tokens,
                temperature=args.temperature,
                top_k=args.top_k,
                seed=args.seed,
                on_token=show,
            )
        finally:
            if shown:  # the error, if any, goes on a line of its own
                print(flush=True)
    seconds = time.perf_counter() - started
    say(f"{len(new)} tokens in {seconds:.2f} s ({len(new) / seconds:.1f} tok/s, prompt included)")
    return 0
