"""What `export` and `generate` do once their options are parsed (`zoo.core.cli.arguments` parses
them): an export is planned (every option checked, nothing loaded) and then run; a generation is a
checked `GenerationRequest`, its answer alone on stdout. Progress goes to stderr."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from pathlib import Path

from zoo.core.cli.arguments import COMMANDS, act, build_parser, command_of, say, token_ids
from zoo.core.io.shown import shown
from zoo.core.io.sigint import Terminated


def run(model_name: str, argv: list[str] | None = None) -> int:
    """`python -m zoo.<model_name> export|generate ...`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, _ = build_parser(f"python -m zoo.{model_name}", command_of(argv, COMMANDS), model_name)
    args = parser.parse_args(argv)
    return act(args, lambda: dispatch(args, model_name))


def dispatch(args, entry: str | None = None, checkpoint: Path | None = None) -> int:
    """The action of `args.command` (`export` of `entry`, or the one its checkpoint names)."""
    if args.command == "export":
        return export_command(args, entry, checkpoint)
    return generate_command(args)


def export_command(args, entry: str | None, checkpoint: Path | None = None) -> int:
    """`export`: plan (every option checked, nothing loaded), then run the plan; with
    --dry-run, print the plan and write nothing (both targets)."""
    from zoo.core.export.options import options_of_args
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    checkpoint = Path(args.checkpoint) if checkpoint is None else checkpoint
    started = time.perf_counter()
    plan = plan_export(checkpoint, args.output, entry=entry, **options_of_args(args))
    if args.dry_run:
        print(plan.describe())
        say("dry run: nothing written")
        return 0
    weights = f"; {plan.compress} weights, module by module" if plan.compress != "fp32" else ""
    if plan.calibration:  # GPTQ: the whole model first, then each module's codes
        weights = f"; {plan.compress} weights, codes chosen on {plan.calibration.name}"
    if plan.target == "apple-engine":
        weights = f" for Apple's engine contract{weights}"
    say(
        f"loading {shown(args.checkpoint)} ({plan.strategy} KV writes, capacity {plan.capacity}"
        f"{weights})"
    )
    with contextlib.redirect_stdout(sys.stderr):  # the converter's banner is progress too
        path = run_plan(plan, progress=say)
    say(f"saved {path} in {time.perf_counter() - started:.1f} s")
    return 0


class Interruption:
    """Ctrl-C (and SIGTERM) during `generate`, noted and acted on between runtime calls: an
    exception raised while the runtime computes aborts the process from native code (exit
    134, "C++ exception handling detected"; seen for both signals), so `check` raises
    KeyboardInterrupt (exit 130; `Terminated`, 143) once the call has returned. Both are
    also blocked in the main thread, so the threads the runtime starts afterwards inherit
    the block (as numpy's do, `zoo.core.io.sigint`): the runtime's own SIGINT handler,
    installed while it loads, never runs (it aborted the process, SIGABRT); the signal
    waits, pending, until `check` takes it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self) -> Interruption:
        import threading

        self.asked, self.previous = None, None
        if threading.current_thread() is threading.main_thread():  # where signals land
            self.previous = {n: signal.signal(n, self._note) for n in self.SIGNALS}
            signal.pthread_sigmask(signal.SIG_BLOCK, set(self.SIGNALS))
        return self

    def _note(self, number: int, _) -> None:
        self.asked = self.asked or (Terminated if number == signal.SIGTERM else KeyboardInterrupt)

    def _pending(self) -> type[BaseException] | None:
        if self.previous is not None and (waiting := signal.sigpending() & set(self.SIGNALS)):
            self._note(signal.sigwait(waiting), None)  # taken: it is acted on here
        return self.asked

    def check(self) -> None:
        if self._pending():
            raise self.asked

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            asked = self._pending()  # a signal during the last call
            signal.pthread_sigmask(signal.SIG_UNBLOCK, set(self.SIGNALS))
            for number, handler in self.previous.items():
                signal.signal(number, handler)
            if asked and exc[0] is None:
                raise asked


def generate_command(args) -> int:
    """`generate`: the prompt through the asset's tokenizer (or ids), then the answer,
    token by token, on stdout; everything else on stderr. Ctrl-C stops it between runtime
    calls (`Interruption`)."""
    with Interruption() as interruption:
        return _generate_command(args, interruption)


def _generate_command(args, interruption: Interruption) -> int:
    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.asset.opened import open_asset
    from zoo.core.asset.tokenizer import encode_prompt, is_bundle, load_tokenizer, tokenizer_path
    from zoo.core.host.request import GenerationRequest

    chat = args.chat or args.system is not None
    if chat and args.prompt is None:
        raise ValueError("--chat and --system take the user's turn as --prompt text")
    bundle = is_bundle(args.asset)
    # opened once (metadata.json read once): the spec, the tokenizer, the load (which
    # checks the files)
    asset = None if bundle else open_asset(args.asset, verify=False)
    spec = None if bundle else DecodeSpec.of_asset(asset)  # checked before loading
    path = tokenizer_path(asset or args.asset, args.tokenizer) if args.prompt is not None else None
    tokenizer = load_tokenizer(path) if path is not None else None
    media, processors = _media(args, asset)  # always through the chat template
    if processors:
        from zoo.core.host.media import media_prompt

        prompt_ids = media_prompt(
            tokenizer, path.parent, args.prompt, media, processors, args.system
        )
    elif tokenizer is not None:
        prompt_ids = encode_prompt(tokenizer, path.parent, args.prompt, chat, args.system)
    else:
        prompt_ids = token_ids(args.prompt_ids)
    request = GenerationRequest(
        tuple(prompt_ids),
        args.max_new_tokens,
        None,
        args.temperature,
        args.top_k,
        args.seed,
        tuple(media["vision"]),
        tuple(media["audio"]),
    )
    if spec is not None:
        request = request.fitted(spec)  # refused here, before the model loads
    draft = None
    if args.speculate:
        from zoo.core.host.speculative import check_kv_only, check_rewindable, check_same_vocabulary

        if bundle:
            raise ValueError("--speculate decodes an asset of `zoo export`")
        check_rewindable(spec)
        if args.speculate.startswith("draft:"):
            draft = open_asset(args.speculate.removeprefix("draft:"), verify=False)
            # names a missing or foreign folder, and a draft that cannot rewind
            check_kv_only(DecodeSpec.of_asset(draft), f"the draft {draft.path.name}")
            check_same_vocabulary(args.asset, draft.path)
    interruption.check()
    return _generate(args, request, tokenizer, asset, interruption, draft)


def _media(args, asset) -> tuple[dict[str, list], dict[str, dict]]:
    """`--image` and `--audio` files, read (a bad file refused by name), for an asset that
    reads them: component -> the inputs, in order; and component -> its processor."""
    from zoo.core.asset.encoders import ENCODERS
    from zoo.core.host.audio import prepare_clip, read_wav
    from zoo.core.host.images import read_image
    from zoo.core.host.media import processors_for

    given = {"vision": (args.image or [], read_image), "audio": (args.audio or [], read_wav)}
    for name, (paths, _) in given.items():
        if paths and (asset is None or args.prompt is None or args.speculate):
            what = "a bundle" if asset is None else "--prompt-ids" if args.prompt is None else ""
            raise ValueError(
                f"{ENCODERS[name].option} goes with --prompt text on an asset of `zoo export`, "
                "without --speculate" + (f" (not {what})" if what else "")
            )
    # an asset without a component refused by name before any file is read
    paths = {name: paths for name, (paths, _) in given.items()}
    processors = processors_for(asset, paths) if asset is not None else {}
    media = {name: [read(path) for path in paths[name]] for name, (_, read) in given.items()}
    for path, clip in zip(paths["audio"], media["audio"], strict=True):  # one that cannot be
        prepare_clip(clip, processors["audio"], path)  # read whole is refused by name here
    return media, processors


def _generate(args, request, tokenizer, asset, interruption: Interruption, draft=None) -> int:
    """Load `asset` (an `OpenedAsset`; None: a bundle of Apple's engine) and decode."""
    from zoo.core.host.compute_unit import specialization
    from zoo.core.host.runtime import default_compute_unit
    from zoo.core.io.quiet import runtime_chatter_hidden

    compute_unit = args.compute_unit or default_compute_unit()
    specialization(compute_unit)  # one this platform has: refused before "loading"
    say(f"loading {args.asset.name} (compute unit {compute_unit})")
    started = time.perf_counter()
    drafter = None
    with runtime_chatter_hidden():  # the runtime logs each function it loads
        if (
            asset is None
        ):  # a bundle, run as Apple's engine is reported to (zoo.core.export.apple_engine)
            from zoo.core.export.apple_engine import EngineRunner

            runner = EngineRunner(args.asset, compute_unit=args.compute_unit)
        else:
            from zoo.core.host.generator import Generator

            runner = Generator(asset, args.compute_unit)
            runner.between_calls = interruption.check  # a long prefill is many calls
            # loaded now, with the runtime's log hidden, not announced in the answer
            if args.speculate:
                runner.functions.load_all()  # every verify width too
            else:
                runner.functions["prefill"]
            for name, items in (("vision", request.images), ("audio", request.audio)):
                if items:
                    runner.functions[name]
            if draft is not None:
                drafter = Generator(draft, args.compute_unit)
                drafter.functions.load_all()
    with runner as generator, drafter or contextlib.nullcontext():
        interruption.check()
        say(
            f"loaded in {time.perf_counter() - started:.1f} s (weights "
            f"{generator.spec.compression}); {counted(len(request.prompt_ids), 'prompt token')}"
        )
        shown: list[int] = []
        printed = ""
        first_token_at: list[float] = []  # when the prompt was read: the first token is out

        def show(token: int) -> None:
            # Decode everything so far and print what is new: token-by-token decoding loses
            # the spaces that tokenizers attach to the next piece.
            nonlocal printed
            interruption.check()  # between two runtime calls
            first_token_at[:] = first_token_at or [time.perf_counter()]
            shown.append(token)
            if tokenizer is None:  # ids, a space between them
                print(f"{' ' if len(shown) > 1 else ''}{token}", end="", flush=True)
                return
            text = tokenizer.decode(shown)
            print(text[len(printed) :], end="", flush=True)
            printed = text

        started = time.perf_counter()
        notes: list[str] = []
        try:
            new = _run(generator, request, show, args.speculate, notes, drafter)
        finally:
            if shown:  # the answer ends its line; an error goes on a line of its own
                print(flush=True)
    seconds = time.perf_counter() - started
    for note in notes:
        say(note)
    say(speed(len(request.prompt_ids), len(new), seconds, first_token_at, started))
    stops = request.stop_token_ids or ()
    if args.max_new_tokens is None and new and new[-1] not in stops:
        if len(new) == request.max_new_tokens:  # (fitted: as many as the context holds)
            say(
                f"the context is full after {counted(len(new), 'new token')} (capacity "
                f"{generator.spec.capacity}); export with a larger --capacity for a longer answer"
            )
    return 0


def counted(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


def speed(prompt: int, new: int, seconds: float, first_token_at: list[float], start: float) -> str:
    """The summary line: reading the prompt and writing the answer measured apart (a
    speculative decoder's gain is in the second; the prompt's reading hid it)."""
    line = f"{counted(new, 'token')} in {seconds:.2f} s"
    if not first_token_at or new < 2:
        return line
    reading = first_token_at[0] - start
    answering = max(seconds - reading, 1e-9)
    return (
        f"{line}: the prompt's {counted(prompt, 'token')} read in {reading:.2f} s "
        f"({prompt / max(reading, 1e-9):.1f} tok/s), then {(new - 1) / answering:.1f} tok/s"
    )


def _run(generator, request, show, speculate, notes: list[str], drafter=None) -> list[int]:
    """The answer: plain, or speculative (`speculate` "lookup" or "draft:PATH", whose
    `Generator` is `drafter`)."""
    if speculate:
        from zoo.core.host.speculative import DraftAsset, generate_by_lookup

        draft = None if drafter is None else DraftAsset(drafter)
        new, stats = generate_by_lookup(
            generator,
            request.prompt_ids,
            request.max_new_tokens,
            request.stop_token_ids,
            on_token=show,
            draft=draft,
            temperature=request.temperature,
            top_k=request.top_k,
            seed=request.seed,
        )
        source = (
            "prompt lookup"
            if draft is None
            else f"draft {Path(speculate.removeprefix('draft:')).name}"
        )
        notes.append(
            f"{source}: {stats['verify calls']} verify calls kept {stats['accepted']} "
            f"of {stats['guesses']} guesses; {stats['decode calls']} decode calls"
            + (f"; {draft.feeds} draft calls" if draft is not None else "")
        )
        return new
    if hasattr(generator, "run"):
        return generator.run(request, on_token=show)
    return generator.generate(  # Apple's engine bundle (zoo.core.export.apple_engine.EngineRunner)
        list(request.prompt_ids),
        request.max_new_tokens or 32,
        temperature=request.temperature,
        top_k=request.top_k,
        seed=request.seed,
        on_token=show,
    )
