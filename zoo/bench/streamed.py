"""`python -m zoo.bench.streamed [--released gpt-oss-20b] [--compress int4-block32]
[--workdir DIR] [--record DIR]`: an export larger than memory, measured.

1. A random-weight bf16 checkpoint of the released config at full width and depth
   (`zoo.bench.checkpoints`; GPT-OSS's `quantization_config` dropped: these are the bf16
   weights a dequantized checkpoint holds, not MXFP4 blocks).
2. `zoo export --stream on --compress PRESET` of it in a child process: wall seconds and
   peak RSS (GNU time's maximum resident set of the export process).
3. A cut of the same model (its first 2 layers at full width, with the embedding and the
   head), exported with each `--cut-compress` preset (int8: the Linux runtime expands
   compressed weights to float32 per loaded function, and its int4 path runs ~15x slower
   than int8 here) and decoded on the runtime in a process of its own: seconds per token,
   peak RSS, or how the process ended.

Not a test (about an hour and ~60 GB of disk for GPT-OSS-20B): a number of this machine,
recorded in `docs/records/export-streamed.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zoo.core.isolate import run_isolated

ROOT = Path(__file__).resolve().parents[2]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def random_checkpoint(model: str, released: str, directory: Path, layers: int | None = None):
    """The released config with random bf16 weights (`layers`: a cut of the first ones)."""
    from zoo.bench.checkpoints import released_config, write_random_checkpoint

    config = released_config(model, released)
    config.pop("quantization_config", None)  # bf16 weights, as a dequantized checkpoint
    if layers is not None:
        config["num_hidden_layers"] = layers
        if "layer_types" in config:
            config["layer_types"] = config["layer_types"][:layers]
    return write_random_checkpoint(model, config, directory)


def timed_export(checkpoint: Path, output: Path, compress: str, capacity: int) -> dict:
    """`zoo export --stream on` in a child process: seconds and peak RSS (GNU time)."""
    command = [
        sys.executable, "-m", "zoo", "export", str(checkpoint), str(output),
        "--compress", compress, "--stream", "on", "--capacity", str(capacity), "--overwrite",
    ]  # fmt: skip
    with tempfile.NamedTemporaryFile("r") as peak:
        started = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", peak.name, *command],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
        kilobytes = int(peak.read().split()[-1])
    return {"seconds": round(seconds, 1), "peak RSS GB": round(kilobytes * 1024 / 1e9, 2)}


def asset_facts(path: Path) -> dict:
    """Size on disk, parts, functions and states of a (streamed) asset."""
    from zoo.core.asset.opened import read_metadata

    zoo = read_metadata(path)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    states = sorted({s for e in zoo["entry_points"].values() for s in e.get("states", [])})
    return {
        "asset GB": round(size / 1e9, 2),
        "parts": len(zoo.get("parts") or {}),
        "functions": sorted(zoo["entry_points"]),
        "states": len(states),
        "state names (first 6)": states[:6],
    }


def timed_decode(asset: str, prompt: int = 4, new: int = 4) -> dict:
    """Feed a prompt of `prompt` ids (shorter than a prefill chunk: decode calls only, so
    the prefill functions are never loaded), then `new` greedy tokens, timed on the
    runtime; with this process's peak RSS (run it in a process of its own)."""
    import resource

    from zoo.core.host.generator import Generator

    with Generator(asset) as generator:
        ids = [(7 * i + 3) % 1000 + 10 for i in range(prompt)]
        started = time.perf_counter()
        logits = generator.feed(ids)
        prefill = time.perf_counter() - started
        steps = []
        for _ in range(new):
            token = int(logits.argmax())
            started = time.perf_counter()
            logits = generator.feed([token])
            steps.append(time.perf_counter() - started)
    steps.sort()
    return {
        "prompt tokens": prompt,
        "prompt s": round(prefill, 2),
        "decode s per token (median)": round(steps[len(steps) // 2], 3),
        "new tokens": new,
        "peak RSS GB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt_oss")
    parser.add_argument("--released", default="gpt-oss-20b")
    parser.add_argument("--compress", default="int4-block32")
    parser.add_argument("--capacity", type=int, default=256)
    parser.add_argument("--workdir", default=os.path.expanduser("~/.cache/coreai-zoo/streamed"))
    parser.add_argument("--record", default=None, help="write export-streamed.json here")
    parser.add_argument(
        "--cut-compress", nargs="*", default=["int8"], help="presets of the decoded cut"
    )
    parser.add_argument("--keep", action="store_true", help="keep the checkpoints and asset")
    args = parser.parse_args(argv)
    from zoo.core.checkpoint.weights import weight_count

    work = Path(args.workdir)
    say(f"writing a random bf16 checkpoint of {args.released} in {work} ...")
    started = time.perf_counter()
    checkpoint = random_checkpoint(args.model, args.released, work / "checkpoint")
    written = time.perf_counter() - started
    say(f"exporting {args.released} range by range ({args.compress}) ...")
    asset = work / f"{args.released}-{args.compress}.aimodel"
    full = {"model": args.released, "preset": args.compress, "parameters": weight_count(checkpoint)}
    full["checkpoint GB"] = round(
        sum(f.stat().st_size for f in checkpoint.glob("*.safetensors")) / 1e9, 2
    )
    full["checkpoint written s"] = round(written, 1)
    full |= timed_export(checkpoint, asset, args.compress, args.capacity)
    full |= asset_facts(asset)
    from zoo.core.export.fit import machine_memory

    full["machine memory GB"] = round(machine_memory() / 1e9, 1)
    say(f"export: {json.dumps(full)}")
    if not args.keep:
        shutil.rmtree(asset, ignore_errors=True)
    cut_checkpoint = random_checkpoint(args.model, args.released, work / "cut-checkpoint", 2)
    cuts = {}
    for preset in args.cut_compress:
        say(f"a cut of {args.released} (2 layers at full width), {preset}: export, decode ...")
        cut_asset = work / f"cut-{preset}.aimodel"
        cut = {"layers": 2, "preset": preset, "parameters": weight_count(cut_checkpoint)}
        cut |= timed_export(cut_checkpoint, cut_asset, preset, args.capacity)
        cut |= asset_facts(cut_asset)
        # in a process of its own: the runtime may be killed (out of memory) or crash
        decoded = run_isolated(timed_decode, str(cut_asset), timeout=3600)
        cut["decode"] = decoded.result if decoded.ok else decoded.summary()
        say(f"cut: {json.dumps(cut)}")
        cuts[preset] = cut
        shutil.rmtree(cut_asset, ignore_errors=True)
    results = {"export": full, "cut": cuts}
    say(json.dumps(results, indent=2))
    if args.record:
        from zoo.core.io.records import write_record

        write_record(args.record, "export-streamed", results)
    if not args.keep:
        for path in (checkpoint, cut_checkpoint):
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
