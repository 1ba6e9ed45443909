"""The command line every zoo entry shares: `python -m zoo.<model> export|generate ...`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from zoo.core.decode import ContextFullError, Generator
from zoo.core.export import read_metadata
from zoo.core.kv import STRATEGIES
from zoo.core.layout import KEY_LAYOUTS, WEIGHT_LAYOUTS, resolve_layout
from zoo.core.runtime import COMPUTE_UNITS, default_compute_unit


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


def build_parser(model_name: str, strategies: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m zoo.{model_name}",
        description=f"Export {model_name} to a Core AI asset, and generate with it.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    export = commands.add_parser("export", help="checkpoint directory -> .aimodel")
    export.add_argument("checkpoint", type=Path, help="config.json + *.safetensors")
    export.add_argument("output", type=Path, help="the .aimodel to write")
    export.add_argument(
        "--strategy",
        default=strategies[0],
        choices=strategies,
        help="KV cache write strategy (default: %(default)s)",
    )
    export.add_argument("--context", type=int, default=256, help="tokens the cache holds")
    export.add_argument("--chunk", type=int, default=8, help="tokens per prefill call")
    export.add_argument("--overwrite", action="store_true", help="replace an existing asset")
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
    generate.add_argument("--max-new-tokens", type=int, default=32)
    generate.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    generate.add_argument("--top-k", type=int, default=None)
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument(
        "--compute-unit",
        default=None,
        choices=COMPUTE_UNITS,
        help="default: $ZOO_COMPUTE_UNIT, else auto",
    )
    return parser


def run(
    model_name: str,
    load: Callable[..., object],
    export: Callable[..., Path],
    argv: list[str] | None = None,
) -> int:
    strategies = [n for n, s in STRATEGIES.items() if s.stateful and s.chunks]
    args = build_parser(model_name, strategies).parse_args(argv)
    try:
        if args.command == "export":
            return _export(args, load, export)
        return _generate(args)
    except (FileNotFoundError, FileExistsError, ValueError, ContextFullError) as error:
        say(f"error: {error}")
        return 2


def _export(args, load, export) -> int:
    started = time.perf_counter()
    say(f"loading {args.checkpoint} ({args.strategy} KV writes, context {args.context})")
    model = load(args.checkpoint, args.strategy, args.context)
    layout = resolve_layout(args.weights_layout, args.keys_layout)
    say(
        f"exporting prefill ({args.chunk} tokens) + decode to {args.output} "
        f"(weights {layout['weights']}, keys {layout['keys']}) ..."
    )
    path = export(
        model,
        args.output,
        chunk=args.chunk,
        overwrite=args.overwrite,
        checkpoint=args.checkpoint,
        **layout,
    )
    say(f"saved {path} in {time.perf_counter() - started:.1f} s")
    return 0


def _tokenizer(args):
    path = args.tokenizer
    if path is None:
        checkpoint = read_metadata(args.asset)["decode"].get("checkpoint")
        if checkpoint:
            path = Path(checkpoint) / "tokenizer.json"
    if path is None or not path.exists():
        raise FileNotFoundError(
            "no tokenizer.json next to the checkpoint: pass --tokenizer PATH, or --prompt-ids"
        )
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _generate(args) -> int:
    tokenizer = _tokenizer(args) if args.prompt is not None else None
    if tokenizer is not None:
        prompt_ids = tokenizer.encode(args.prompt).ids
    else:
        prompt_ids = [int(i) for i in args.prompt_ids.split(",") if i.strip()]
    say(f"loading {args.asset} (compute unit {args.compute_unit or default_compute_unit()})")
    started = time.perf_counter()
    with Generator(args.asset, args.compute_unit) as generator:
        say(f"loaded in {time.perf_counter() - started:.1f} s; {len(prompt_ids)} prompt tokens")

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
        new = generator.generate(
            prompt_ids,
            args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            seed=args.seed,
            on_token=show,
        )
    seconds = time.perf_counter() - started
    print()
    say(f"{len(new)} tokens in {seconds:.2f} s ({len(new) / seconds:.1f} tok/s, prompt included)")
    return 0
