"""What the zoo's tests share (the pytest hooks are `zoo.pytest_plugin`'s):

- shares results of isolated runs within one test session: the KV matrix is run by its
  zoo test, by the page that shows it and by its snippet; the first run computes each cell,
  the others reuse it when the code and the arguments are the same (see `cached_call`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from zoo.core.host.runtime import default_compute_unit
from zoo.reference import logits_error, make_tiny_checkpoint, reference_model

CACHE_ENV = "ZOO_RESULT_CACHE"
# runtime vs transformers logits of a tiny fp32 model (measured: 1e-7 to 1e-5)
LOGITS_TOLERANCE = 1e-4


# The layouts the zoo tests export: this platform's default and the model as authored.
TEST_LAYOUTS = {
    # with a verify function of 4 tokens: prompt lookup is checked on it (`greedy_and_lookup`)
    "default": {"score_chunk": 4},
    "as-authored": {"weights": "linear", "keys": "bhtd"},
    "ranges": {"layers_per_function": 1},  # one function per layer (zoo.core.export.ranges)
    # prefill over attention spans of 8 and 16 columns below the 64 of the tests' context
    # (zoo.core.asset.decode_spec.DecodeSpec.spans): check_layout_computes_the_same calls all three
    "spans": {"spans": [8, 16]},
    "ranges-spans": {"layers_per_function": 1, "spans": [8, 16]},
    # mixtures of experts, each formulation beside the default ("auto": every expert in
    # Linux's blocked layout, GatherMM on a Mac; zoo.core.model.layout.auto_experts)
    "all-experts": {"experts": "all"},
    "chosen-experts": {"experts": "chosen"},
    "int8-kv": {
        "kv_cache": "int8"
    },  # the KV cache as int8 codes and scales (zoo.core.model.kv_cache)
}


class ExportedAssets(dict):
    """`(variant, strategy[, layout])` -> asset, exported on first use, kept for the session.

    `export(variant, strategy, path, **layout)` writes the asset at `path`; `layout` names
    one of `TEST_LAYOUTS` ("default" when left out).
    """

    def __init__(self, directory, export) -> None:
        super().__init__()
        self.directory, self.export = directory, export

    def __getitem__(self, key):
        variant, strategy, layout = (*key, "default")[:3]  # one asset per normalised key
        key = (variant, strategy, layout)
        if key not in self:
            path = self.directory / f"{variant}-{strategy}-{layout}.aimodel"
            self[key] = self.export(variant, strategy, path, **TEST_LAYOUTS[layout])
        return super().__getitem__(key)


RECORD_ENV = "ZOO_RECORD_DIR"


def record(name: str, results: dict) -> None:
    """Write a record of this run when `pytest --record DIR` (or `$ZOO_RECORD_DIR`) asks."""
    directory = os.environ.get(RECORD_ENV)
    if directory:
        from zoo.core.io.records import write_record

        write_record(directory, name, results, compute_unit=default_compute_unit())


def engine_greedy_on_runtime(
    bundle: str, prompt: list[int], context: int, chunk: int, new_tokens: int = 8
) -> dict:
    """Greedy tokens and the logits after the prompt from a bundle for Apple's engine, run
    as that engine is reported to run it (isolate it:
    `zoo.core.export.apple_engine.EngineRunner`)."""
    from zoo.core.export.apple_engine import EngineRunner

    with EngineRunner(bundle, context, chunk) as runner:
        logits = runner.feed(prompt)
        tokens = runner.generate(prompt, new_tokens, stop_token_ids=[])
    return {"tokens": tokens, "logits": logits.tolist()}


def exported_assets(model: str, checkpoints: dict, directory, capacity: int, chunk: int):
    """The session's `ExportedAssets` of zoo model `model` over its tiny `checkpoints`."""
    from zoo.core.export.functions import export_model
    from zoo.core.model.entry import get_entry

    def export(variant, strategy, path, **layout):
        loaded = get_entry(model).load(checkpoints[variant], strategy, capacity)
        return export_model(loaded, path, chunk=chunk, checkpoint=checkpoints[variant], **layout)

    return ExportedAssets(directory, export)


def check_runtime_greedy(
    model: str,
    checkpoints: dict,
    assets: ExportedAssets,
    variant: str,
    strategy: str,
    prompt: list[int],
    layout: str = "default",
) -> None:
    """8 greedy tokens of the session's asset on the Core AI runtime, in a process of their
    own, against transformers' `generate` on the same checkpoint; recorded, and compared
    with what this target expects of the recipe's KV write (`zoo.lab.expected`: e.g. a
    crash on the macOS beta GPU)."""
    from zoo.core.asset.opened import read_metadata
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.core.model.entry import get_entry
    from zoo.lab.expected import RAN_EXACT, current_target, expected, mismatch
    from zoo.reference import greedy_reference_logits

    asset = assets[variant, strategy, layout]
    reference = reference_model(get_entry(model), checkpoints[variant])
    want, want_rows = greedy_reference_logits(reference, prompt)
    from zoo.testing_speculative import greedy_and_lookup

    greedy = greedy_and_lookup if "score_chunk" in TEST_LAYOUTS[layout] else runtime_greedy
    outcome = run_isolated(greedy, str(asset), prompt, timeout=300)
    if outcome.ok and "speculative" in outcome.result:  # plain greedy's tokens, exactly
        got = outcome.result
        assert got["speculative"] == got["plain"], got
        assert got["verify calls"] > 2 and got["kept some, not all"], got
    elif outcome.ok and "lookup refused" in outcome.result:
        assert "recurrent" in outcome.result["lookup refused"], outcome.result
    error = math.nan
    if outcome.ok:  # tokens alone prove little where a tiny model repeats one token
        identical = sum(a == b for a, b in zip(outcome.result["tokens"], want, strict=True))
        error = logits_error(outcome.result, want, want_rows)
        if error < LOGITS_TOLERANCE:
            got = RAN_EXACT
        elif identical == len(want):
            got = f"wrong numbers: logits off by {error:.1e}"
        else:
            got = f"wrong numbers: {identical}/8 identical"
        tokens = f"{identical}/8 identical"
    else:
        got = tokens = outcome.summary()
    stored = read_metadata(asset)["decode"]["layout"]
    row = {
        "config": variant,
        "KV strategy": strategy,
        "layout": ", ".join(f"{k} {v}" for k, v in stored.items()),
        "greedy tokens on the runtime": tokens,
        "logits max abs error (runtime)": float(f"{error:.2g}"),
    }
    suffix = "" if layout == "default" else f"-{layout}"
    record(f"{model}-greedy-{variant}-{strategy}{suffix}", {"rows": [row]})
    want_outcome = expected("kv-write", strategy)
    problem = mismatch(
        f"{model} {variant}/{layout} on {current_target()}",
        strategy,
        want_outcome.outcome,
        got,
        reported_fixed=want_outcome.detail.startswith("reported fixed"),
    )
    detail = (
        f"runtime {outcome.result['tokens']}, transformers {want}, logits off by {error:.1e}"
        if outcome.ok
        else outcome.detail
    )
    assert problem is None, f"{problem}: {detail} (expectation: {want_outcome.source})"


def check_layout_computes_the_same(
    assets: ExportedAssets, variant: str, strategy: str, layout: str
) -> None:
    """The asset exported in `layout` (layer ranges, attention spans) computes what the
    one-function, whole-context asset computes: three chunks of prefill (pipelined over the
    ranges, each chunk on the shortest span that holds it), then single steps."""
    import numpy as np

    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.host.generator import runtime_feed_logits
    from zoo.core.isolate import run_isolated

    other, whole = assets[variant, strategy, layout], assets[variant, strategy]
    spec, asked = DecodeSpec.of_asset(other), TEST_LAYOUTS[layout]
    if "layers_per_function" in asked:
        assert spec.function_names("prefill") == [f"prefill_{i}" for i in range(len(spec.ranges))]
        assert len(spec.ranges) > 1, "the tiny model should have two layers or more"
    assert spec.spans == asked.get("spans")
    chunk = spec.chunk  # a chunk and two steps more than the spans hold: every span is called
    pieces = [[(7 * i + 3) % 97 + 1 for i in range(3 * chunk + 1)], [5], [9, 11], [4] * (chunk + 2)]
    got = run_isolated(runtime_feed_logits, str(other), pieces, timeout=300)
    want = run_isolated(runtime_feed_logits, str(whole), pieces, timeout=300)
    assert got.ok and want.ok, (got.summary(), want.summary())
    gap = np.abs(np.array(got.result["logits"]) - np.array(want.result["logits"])).max()
    assert gap < 1e-5
    # chunks ending at 4, 8, 12 and 20 (chunk 4): spans 8, 8, 16, then the whole context
    for span in [*(spec.spans or []), None]:
        assert all(name in got.result["called"] for name in spec.function_names("prefill", span))
    assert not any("decode_s" in name for name in got.result["called"])


def entry_fixtures(model: str, capacity: int = 64, chunk: int = 4):
    """The session fixtures of an entry's tests (`checkpoints, assets = entry_fixtures(...)`
    in its conftest.py): every tiny variant, plus the default one in the multimodal layout
    where the family has one; and the `ExportedAssets` over them, exported on first use."""
    import pytest

    from zoo.core.model.entry import get_entry

    @pytest.fixture(scope="session")
    def checkpoints(tmp_path_factory) -> dict:
        entry, root = get_entry(model), tmp_path_factory.mktemp(f"{model}-checkpoints")
        made = {v: make_tiny_checkpoint(entry, root / v, v) for v in entry.tiny.variants}
        if not entry.text_only:
            made["multimodal"] = make_tiny_checkpoint(entry, root / "multimodal", multimodal=True)
        return made

    @pytest.fixture(scope="session")
    def assets(checkpoints, tmp_path_factory) -> ExportedAssets:
        directory = tmp_path_factory.mktemp(f"{model}-assets")
        return exported_assets(model, checkpoints, directory, capacity, chunk)

    return checkpoints, assets


def check_logits_match_transformers(model: str, checkpoint, prompt: list[int]) -> None:
    """The re-authored torch model's logits of `prompt` are transformers' within 1e-4."""
    import torch

    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry

    entry = get_entry(model)
    ours = entry.load(checkpoint, "runtime-index", 64)
    with torch.no_grad():
        want = reference_model(entry, checkpoint)(torch.tensor([prompt])).logits
    assert (torch_logits(ours, prompt) - want).abs().max().item() < 1e-4


def check_window_shorter_than_the_cache(
    model: str, checkpoint, capacity: int, prompt: list[int], directory
) -> None:
    """A sliding window shorter than the cache (and than prompt + new tokens): eager logits
    and, with both KV strategies, runtime greedy tokens and logits like transformers."""
    import torch

    from zoo.core.export.functions import export_model
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry
    from zoo.reference import greedy_reference_logits

    entry = get_entry(model)
    reference = reference_model(entry, checkpoint).float()  # released files store bf16
    with torch.no_grad():
        want = reference(torch.tensor([prompt])).logits
    ours = entry.load(checkpoint, "runtime-index", capacity)
    window = ours.sliding_window
    assert window is not None and window < len(prompt) < capacity, (window, len(prompt))
    assert (torch_logits(ours, prompt) - want).abs().max().item() < LOGITS_TOLERANCE
    tokens, rows = greedy_reference_logits(reference, prompt)
    for strategy in ("runtime-index", "input-mask-blend"):  # the first already loaded
        loaded = ours if strategy == "runtime-index" else entry.load(checkpoint, strategy, capacity)
        asset = export_model(loaded, Path(directory) / f"window-{strategy}.aimodel", chunk=4)
        got = run_isolated(runtime_greedy, str(asset), prompt, timeout=300)
        assert got.ok, got.summary()
        assert got.result["tokens"] == tokens, (strategy, got.result["tokens"], tokens)
        assert logits_error(got.result, tokens, rows) < LOGITS_TOLERANCE


def check_cli_export_and_generate(model: str, checkpoint, directory) -> None:
    """`python -m zoo.MODEL export` a tiny checkpoint, then `generate` 4 tokens from text."""
    import subprocess
    import sys

    def cli(*args):
        command = [sys.executable, "-m", f"zoo.{model}", *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=600)

    out = directory / f"{model}-cli.aimodel"
    export = cli("export", checkpoint, out, "--capacity", 32, "--chunk", 4)
    assert export.returncode == 0, export.stderr
    generate = cli("generate", out, "--prompt", "w5 w17 w33", "--max-new-tokens", 4)
    assert generate.returncode == 0, generate.stderr
    assert len(generate.stdout.split()) == 4


def real_model_fixture(name: str):
    """A module fixture: (checkpoint, fp32 asset) of real model `name` (`zoo.fetch`),
    fetched and exported once per zoo version."""
    import pytest

    @pytest.fixture(scope="module")
    def real():
        from zoo.fetch import fetch
        from zoo.real_assets import exported

        return fetch(name), exported(name, "fp32")

    return real


def check_real_text(real: tuple, prompt: str, chat: bool, new_tokens: int = 32) -> None:
    """The runtime's greedy tokens on real weights equal transformers' for `new_tokens`."""
    from zoo.reference import text_beside_transformers

    checkpoint, asset = real
    row = text_beside_transformers(asset, checkpoint, prompt, chat=chat, new_tokens=new_tokens)
    assert row["tokens"]["runtime"] == row["tokens"]["transformers"], row
    assert row[f"first {new_tokens} tokens agree"] == f"{new_tokens}/{new_tokens}"


def check_real_perplexity(real: tuple, name: str) -> None:
    """The fp32 asset's perplexity of the scored text on the runtime is the eager model's
    within 0.5% (`zoo.quality`), and its top-1 tokens are eager's."""
    import numpy as np

    from zoo.core.isolate import run_isolated
    from zoo.quality import SCORED, eager_logits, perplexity, runtime_logits, scores, text_ids

    _, asset = real
    ids = text_ids(name, SCORED, tokens=128)  # runtime against eager: not a quality number
    outcome = run_isolated(runtime_logits, str(asset), ids, timeout=900)
    assert outcome.ok, outcome.summary()
    eager = eager_logits(name, "fp32", ids)
    runtime = scores(np.asarray(outcome.result, np.float32), ids, eager)
    assert abs(runtime["perplexity"] / perplexity(eager, ids) - 1) < 0.005, runtime
    assert runtime["top-1"] > 0.99 and runtime["KL"] < 1e-3, runtime
