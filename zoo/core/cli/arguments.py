"""The command line of an export and a generation: `zoo export | generate` and
`python -m zoo.<model> export | generate` share these options and actions.

Importing this module imports no torch: `generate` runs on numpy and the runtime, and the
export options (which list the presets and layouts, torch modules) are added to a parser
only when the command is `export` (`build_parser`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from zoo.core.export.options import whole_number
from zoo.core.host.runtime import COMPUTE_UNITS
from zoo.core.io.sigint import Terminated, terminate_as_interrupt

COMMANDS = {
    "export": "checkpoint folder -> .aimodel asset",
    "generate": "prompt -> continuation on the Core AI runtime",
}


def say(message: str) -> None:
    """Progress goes to stderr, so stdout carries only the generated text or ids."""
    print(message, file=sys.stderr, flush=True)


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


# -- option types: ASCII digits only (int() would also read "١٢", "１２" and "1_0") --------


def non_negative_float(text: str) -> float:
    if not re.fullmatch(r"\s*[0-9.eE+-]+\s*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number")
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
        if not re.fullmatch(r"-?[0-9]+", piece):
            shown = repr(piece) if piece else "an empty id (two commas in a row?)"
            raise ValueError(f"--prompt-ids: {shown} is not a whole-number token id")
        ids.append(int(piece))
    return ids


def speculation(text: str) -> str:
    """`lookup`, or `draft:PATH` (a draft asset; checked against the model before loading)."""
    if text == "lookup" or (text.startswith("draft:") and len(text) > len("draft:")):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: give lookup or draft:PATH/TO/DRAFT.aimodel")


# -- the parser ---------------------------------------------------------------------------


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default shown beside it (unless it has none, or its help says it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is False  # (0.0 == False)
        if not unset and action.default != argparse.SUPPRESS and "default" not in text:
            text += " (default: %(default)s)"
        return text


def common_options() -> argparse.ArgumentParser:
    """Options every command takes (anywhere on its line)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before the command or after it, neither default hides the other
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback"
    )
    return common


def build_parser(prog: str, command: str | None, entry: str | None = None):
    """`prog export|generate ...`: each command's options are built only when it is the
    one asked for (`command`), so `generate` never imports torch. `entry` (a zoo entry's
    name) fixes the model of `python -m zoo.<entry>`; otherwise `export` picks it."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Export open LLMs to Core AI assets, and generate text with them.",
        formatter_class=HelpFormatter,
        parents=[common_options()],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            parents=[common_options()],
            formatter_class=HelpFormatter,
        )
        if name == command == "export":
            add_export_options(sub, entry)
        elif name == command == "generate":
            add_generate_options(sub)
    return parser, commands


def add_export_options(parser: argparse.ArgumentParser, entry: str | None) -> None:
    """`export`'s arguments: the checkpoint and the asset, --dry-run, then every option
    declared in `zoo.core.export.options.EXPORT_OPTIONS` (the Python keywords' too)."""
    from zoo.core.export import options

    source = (
        "a checkpoint folder (config.json + *.safetensors)"
        if entry
        else "a checkpoint folder (config.json + *.safetensors), a .gguf file, or a "
        "Hugging Face id ORG/NAME already in the local hub cache"
    )
    parser.add_argument("checkpoint", help=source)
    parser.add_argument("output", type=Path, help="the .aimodel to write")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved plan (options, estimated size and memory), write nothing",
    )
    options.add_export_options(parser)


def add_generate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("asset", type=Path, help="an .aimodel exported by `zoo export`")
    prompt = parser.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="text, through the asset's tokenizer")
    prompt.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 2,651,6037")
    parser.add_argument(
        "--chat",
        action="store_true",
        help="send --prompt as the user's turn through the chat template; stop at the end "
        "of the model's turn",
    )
    parser.add_argument("--system", help="a system turn before the user's (implies --chat)")
    parser.add_argument(
        "--image",
        type=Path,
        action="append",
        metavar="FILE",
        help="an image in the user's turn, before --prompt (repeat for several; through the "
        "chat template; an asset with a vision component, docs/guides/multimodal.md)",
    )
    parser.add_argument(
        "--audio",
        type=Path,
        action="append",
        metavar="FILE",
        help="a WAV clip (16 kHz PCM) in the user's turn, after the images (repeat for "
        "several; an asset with an audio component: Gemma 4 E2B/E4B)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=whole_number(1),
        help="at most this many new tokens (default: as many as the context holds after "
        "the prompt); a request that cannot fit is refused before decoding",
    )
    parser.add_argument("--temperature", type=non_negative_float, default=0.0, help="0: greedy")
    parser.add_argument(
        "--top-k",
        type=whole_number(1),
        help="sample among the k likeliest (default: among every token)",
    )
    parser.add_argument(
        "--seed",
        type=whole_number(0),
        help="the sampling's random seed (default: a fresh one each run)",
    )
    parser.add_argument(
        "--speculate",
        type=speculation,
        metavar="{lookup,draft:ASSET}",
        help="check guesses with the asset's verify function (exported with --verify K): "
        "lookup guesses from the context, draft:ASSET from a smaller asset with the same "
        "tokenizer; greedy, the same tokens; sampling, the same distribution",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="a tokenizer.json (default: the one the asset carries)",
    )
    parser.add_argument(
        "--compute-unit",
        choices=COMPUTE_UNITS,
        help="default: $ZOO_COMPUTE_UNIT, else auto (gpu and ane on macOS 27+ only)",
    )


def command_of(argv: list[str], commands) -> str | None:
    """The command named first on the line (options may come before it)."""
    return next((a for a in argv if a in commands), None)


def act(args, action: Callable[[], int]) -> int:
    """Run a command's action: errors as one line (exit 2), Ctrl-C as exit 130, SIGTERM
    as 143 (both after what was being written is cleaned up)."""
    try:
        with terminate_as_interrupt():
            return action()
    except Terminated:
        say("\nterminated")
        return 143
    except KeyboardInterrupt:
        say("\ninterrupted")
        return 130
    except BrokenPipeError:  # `zoo ... | head`: the reader left; nothing to say
        with contextlib.suppress(OSError):
            sys.stdout = open("/dev/null", "w")  # noqa: SIM115 - no flush error at exit
        return 0
    except Exception as error:
        if getattr(args, "debug", False):
            raise
        # the zoo's own errors and a user's (a value, a file) speak for themselves; a
        # library's exception is named, so its words are not taken for the zoo's
        own = type(error).__module__.startswith("zoo.")
        plain = own or isinstance(error, ValueError | OSError | IndexError)
        kind = "" if plain else f"{type(error).__name__}: "
        say(f"error: {kind}{error} (--debug for the traceback)")
        return 2
