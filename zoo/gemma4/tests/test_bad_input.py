"""Bad input, table-driven: each case gives one clear line (or the right result), exits
with the stated code, and changes nothing on disk. The promises are listed in README.md
("What the zoo promises about bad input").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.core.asset.opened import read_metadata
from zoo.core.cli.commands import run
from zoo.core.export.session_cache import CACHE_ENV as EXPORT_CACHE_ENV
from zoo.gemma4 import export_gemma4, load_gemma4

from .conftest import CAPACITY, CHUNK

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


@pytest.fixture(scope="module")
def work(checkpoints, assets, tmp_path_factory) -> Path:
    """A directory holding a checkpoint `ck`, an asset `g4.aimodel` and a few bad files."""
    root = tmp_path_factory.mktemp("bad-input")
    shutil.copytree(checkpoints["kv-sharing"], root / "ck")
    shutil.copytree(assets["kv-sharing", "input-mask-blend"], root / "g4.aimodel")
    (root / "notjson.json").write_text("{ not json")
    (root / "mine.aimodel").mkdir()  # a user's folder that only looks like an asset
    (root / "mine.aimodel" / "notes.txt").write_text("keep me")
    (root / "list.json").write_text("[1, 2]")
    for name, change in {
        "bad-types": {"num_hidden_layers": "6"},
        "only-type": None,
        "bad-json": "broken",
        "bad-tensors": "truncate",
        "nan-eps": {"rms_norm_eps": float("nan")},
        "negative-eps": {"rms_norm_eps": -1e-6},
        "zero-window": {"sliding_window": 0},
        "far-eos": {"eos_token_id": 99999},
        "nan-weight": "nan",
        "nan-table": "nan-table",
        "two-shards": "duplicate",
        "fifo-config": "fifo",
        "dir-weights": "directory",
    }.items():
        target = root / name
        shutil.copytree(root / "ck", target)
        config = json.loads((target / "config.json").read_text())
        if change == "broken":
            (target / "config.json").write_text(json.dumps(config)[:-7])
        elif change == "truncate":
            data = (target / "model.safetensors").read_bytes()
            (target / "model.safetensors").write_bytes(data[: len(data) // 2])
        elif change is None:
            (target / "config.json").write_text('{"model_type": "gemma4_text"}')
        elif change in ("nan", "nan-table", "duplicate"):
            from safetensors.torch import load_file, save_file

            tensors = load_file(target / "model.safetensors")
            if change == "nan":
                tensors["model.norm.weight"][0] = float("nan")
            elif change == "nan-table":  # the per-layer-embedding table, a sidecar
                tensors["model.embed_tokens_per_layer.weight"][5, 0] = float("nan")
            else:  # a second shard holding one tensor again, and no index
                save_file(
                    {"model.norm.weight": tensors["model.norm.weight"] * 2},
                    target / "b.safetensors",
                )
            save_file(tensors, target / "model.safetensors")
        elif change == "fifo":
            (target / "config.json").unlink()
            os.mkfifo(target / "config.json")
        elif change == "directory":
            (target / "model.safetensors").unlink()
            (target / "model.safetensors").mkdir()
        else:
            (target / "config.json").write_text(json.dumps({**config, **change}))
    for name, damage in {
        "no-program": "delete",
        "truncated": "truncate",
        "no-meta": "meta",
        "no-manifest": "manifest",
        "unlisted": "unlist",
        "true-stop": "stop",
        "no-write-mask": "spec",
    }.items():
        target = root / f"{name}.aimodel"
        shutil.copytree(root / "g4.aimodel", target)
        if damage == "delete":
            (target / "main.mlirb").unlink()
        elif damage == "truncate":
            (target / "main.mlirb").write_bytes((target / "main.mlirb").read_bytes()[:1000])
        elif damage == "meta":
            (target / "metadata.json").unlink()
        else:  # metadata.json edited by hand
            metadata = json.loads((target / "metadata.json").read_text())
            zoo = metadata["creatorDefinedMetadata"]["zoo"]
            if damage == "manifest":
                del zoo["files"]
            elif damage == "unlist":
                del zoo["files"]["tokenizer.json"]
            elif damage == "stop":
                zoo["decode"]["stop_token_ids"] = [True]
            else:
                zoo["decode"]["unknown_field"] = 1
            (target / "metadata.json").write_text(json.dumps(metadata))
    return root


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


# (arguments, exit code, a fragment the one-line error must contain)
CASES = [
    ("generate g4.aimodel --prompt-ids 2,-1", 2, "token id -1 is outside the vocabulary"),
    ("generate g4.aimodel --prompt-ids -100", 2, "token id -100 is outside"),
    ("generate g4.aimodel --prompt-ids 2,2.5", 2, "'2.5' is not a whole-number token id"),
    ("generate g4.aimodel --prompt-ids 2,128", 2, "token id 128 is outside the vocabulary"),
    ("generate g4.aimodel --prompt-ids ,", 2, "no token ids given"),
    ("generate g4.aimodel --prompt-ids 2 --temperature -1", 2, "-1 is not >= 0"),
    ("generate g4.aimodel --prompt-ids 2 --top-k -2", 2, "-2 is less than 1"),
    ("generate g4.aimodel --prompt-ids 2 --max-new-tokens -3", 2, "-3 is less than 1"),
    ("generate g4.aimodel --prompt-ids 2 --max-new-tokens x", 2, "'x' is not a whole number"),
    ("generate nosuch.aimodel --prompt-ids 2", 2, "no asset at nosuch.aimodel"),
    ("generate no-program.aimodel --prompt-ids 2", 2, "main.mlirb is missing"),
    ("generate truncated.aimodel --prompt-ids 2", 2, "main.mlirb has 1000 bytes"),
    ("generate no-meta.aimodel --prompt-ids 2", 2, "no metadata.json"),
    ("generate g4.aimodel --prompt x --tokenizer nosuch.json", 2, "nosuch.json: no such file"),
    ("generate g4.aimodel --prompt x --tokenizer notjson.json", 2, "is not a tokenizer.json"),
    ("generate g4.aimodel --prompt-ids 2,3 --max-new-tokens 80", 2, "the context holds 64"),
    ("export ck out/x.aimodel --capacity -5", 2, "-5 is less than 2"),
    ("export ck out/x.aimodel --capacity 1000000000", 2, "more than the zoo's models support"),
    ("export ck out/x.aimodel --chunk 100 --capacity 64", 2, "--chunk 100 is longer"),
    ("export ck out/x.aimodel --layers-per-function 0", 2, "0 is less than 1"),
    ("export ck out/x.aimodel --layers-per-function many", 2, "'many' is not a whole number"),
    ("export ck out/x.aimodel --spans 0", 2, "0 is less than 1"),
    ("export ck out/x.aimodel --spans 8,,16", 2, "'' is not a whole number"),
    ("export ck out/x.aimodel --capacity 64 --chunk 4 --spans 64", 2, "to below the capacity (64)"),
    ("export ck out/x.aimodel --capacity 64 --chunk 4 --spans 2", 2, "from the prefill chunk (4)"),
    ("export ck out/x.aimodel --spans 32,16", 2, "ascending and distinct, got [32, 16]"),
    ("export ck out/bundle --target apple-engine --spans 16", 2, "drop --spans"),
    ("export ck g4.aimodel", 2, "g4.aimodel already exists"),
    ("export ck ck/x.aimodel --overwrite", 2, "inside) the checkpoint"),
    ("export ck ck.aimodel --overwrite", 0, ""),  # a name like the checkpoint's is fine
    ("export nosuch out/x.aimodel", 2, "nosuch is not a directory"),
    ("export bad-types out/x.aimodel", 2, "num_hidden_layers='6' (expected int)"),
    ("export only-type out/x.aimodel", 2, "Does config.json belong to these weights?"),
    ("export bad-json out/x.aimodel", 2, "config.json: not valid JSON"),
    ("export bad-tensors out/x.aimodel", 2, "model.safetensors: not a readable safetensors"),
    ("export ck out/x.txt", 2, "must end in .aimodel"),
    ("export ck mine.aimodel --overwrite", 2, "is not an asset the zoo wrote"),
    ("export nan-eps out/x.aimodel", 2, "rms_norm_eps=nan (expected a finite number)"),
    ("export negative-eps out/x.aimodel", 2, "rms_norm_eps=-1e-06 (expected a number above 0)"),
    ("export zero-window out/x.aimodel", 2, "sliding_window=0 (expected a number above 0)"),
    ("export far-eos out/x.aimodel", 2, "eos_token_id [99999] is outside the vocabulary"),
    ("export nan-weight out/x.aimodel", 2, "model.norm.weight has NaN or infinite values"),
    (
        "export nan-table out/x.aimodel --sidecar on",
        2,
        "embed_tokens_per_layer.weight has NaN or infinite values",
    ),
    ("export two-shards out/x.aimodel", 2, "model.norm.weight is in both"),
    ("export fifo-config out/x.aimodel", 2, "config.json is not a regular file"),
    ("export dir-weights out/x.aimodel", 2, "model.safetensors is not a regular file"),
    ("generate g4.aimodel --prompt-ids ١٢,٣", 2, "'١٢' is not a whole-number token id"),
    ("generate g4.aimodel --prompt-ids １２", 2, "'１２' is not a whole-number token id"),
    ("generate g4.aimodel --prompt-ids 1_0", 2, "'1_0' is not a whole-number token id"),
    ("generate g4.aimodel --prompt-ids 1,,2", 2, "an empty id (two commas in a row?)"),
    ("generate g4.aimodel --prompt-ids 2 --seed -1", 2, "-1 is less than 0"),
    ("generate no-manifest.aimodel --prompt-ids 2", 2, "has lost its list of files"),
    ("generate unlisted.aimodel --prompt-ids 2", 2, "tokenizer.json not in its list of files"),
    ("generate true-stop.aimodel --prompt-ids 2", 2, "stop id True is not a token id"),
    ("generate no-write-mask.aimodel --prompt-ids 2", 2, "its decode spec is damaged"),
    ("generate g4.aimodel --prompt x --tokenizer ck", 2, "ck: is a directory"),
]
if sys.platform == "linux":
    CASES.append(("generate g4.aimodel --prompt-ids 2 --compute-unit gpu", 2, "needs macOS 27"))
    CASES.append(("export ck /proc/x.aimodel", 2, "/proc is a virtual filesystem"))


@pytest.mark.parametrize("line,code,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_clear_line(work, line, code, fragment, capsys, monkeypatch):
    monkeypatch.chdir(work)
    before = snapshot(work)
    try:
        got = run("gemma4", line.split())
    except SystemExit as exit:  # argparse's own usage errors
        got = exit.code
    err = capsys.readouterr().err
    assert got == code, err
    assert fragment in err, err
    assert "Traceback" not in err
    if code:
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and len(errors[0]) < 500, err
        assert snapshot(work) == before, "a failed command changed files"
    else:
        shutil.rmtree(work / "ck.aimodel")


def test_debug_shows_the_traceback(work, monkeypatch):
    monkeypatch.chdir(work)
    with pytest.raises(FileNotFoundError):
        run("gemma4", ["--debug", "generate", "x.aimodel", "--prompt-ids", "2"])


def test_a_request_past_the_context_is_refused_before_decoding(work, capfd, monkeypatch):
    monkeypatch.chdir(work)
    line = "generate g4.aimodel --max-new-tokens 10 --prompt-ids " + ",".join(["2"] * 60)
    assert run("gemma4", line.split()) == 2
    captured = capfd.readouterr()
    assert captured.out == ""  # not one token: the request was refused before loading
    assert "room for 5 new, not 10; ask for fewer (--max-new-tokens 5)" in captured.err
    assert "loading" not in captured.err


def test_max_new_tokens_defaults_to_what_the_context_holds(work, capfd, monkeypatch):
    monkeypatch.chdir(work)
    line = "generate g4.aimodel --prompt-ids " + ",".join(["2"] * 60)
    assert run("gemma4", [*line.split(), "--temperature", "0"]) == 0
    captured = capfd.readouterr()
    assert captured.out.endswith("\n")  # the answer's line is closed
    # 64 positions, 60 taken by the prompt: 5 new tokens (the last is never fed back),
    # fewer if a stop id came first
    assert 1 <= len(captured.out.split()) <= 5


def python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )


def test_an_unclosed_model_does_not_hang_the_interpreter(work):
    for code in (
        f"from zoo.core.host.runtime import Model; m = Model.load({str(work / 'g4.aimodel')!r})",
        "from zoo.core.host.generator import Generator; "
        f"g = Generator({str(work / 'g4.aimodel')!r}); print(g.generate([2, 3], 2))",
    ):
        done = python(code, timeout=120)  # used to wait forever at exit
        assert done.returncode == 0, done.stderr[-2000:]


def test_a_damaged_asset_never_reaches_the_runtime(work):
    from zoo.core.asset.opened import AssetError
    from zoo.core.host.runtime import Model

    for name, fragment in (("no-program", "missing"), ("truncated", "1000 bytes")):
        with pytest.raises(AssetError, match=fragment):
            Model.load(work / f"{name}.aimodel")
    altered = work / "altered.aimodel"
    shutil.copytree(work / "g4.aimodel", altered)
    data = bytearray((altered / "main.mlirb").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (altered / "main.mlirb").write_bytes(bytes(data))
    with pytest.raises(AssetError, match="altered since the export"):
        Model.load(altered)
    shutil.rmtree(altered)


def test_the_manifest_lists_every_file(work):
    files = read_metadata(work / "g4.aimodel")["files"]
    assert set(files) == {p.name for p in (work / "g4.aimodel").iterdir()} - {"metadata.json"}
    assert all(len(entry["sha256"]) == 64 and entry["size"] > 0 for entry in files.values())


def test_an_interrupted_export_leaves_nothing(work, tmp_path):
    """SIGTERM during the export: no staging directory, no half asset, no new parent."""
    out = tmp_path / "new" / "deeper" / "x.aimodel"
    child = subprocess.Popen(
        [sys.executable, "-m", "zoo.gemma4", "export", str(work / "ck"), str(out)],
        stderr=subprocess.PIPE,
        text=True,
        # an export that runs: not the copy of the session's identical one
        env={k: v for k, v in os.environ.items() if k != EXPORT_CACHE_ENV},
    )
    deadline = time.time() + 120
    for line in child.stderr:  # wait until the long part has started
        if "converting" in line or time.time() > deadline:
            break
    time.sleep(1.0)
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=120)
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").rglob("*"))
    assert not list(tmp_path.rglob("*.partial"))


def test_stale_staging_of_a_killed_export_is_removed(work, tmp_path):
    stale = tmp_path / ".x.aimodel.999999.abcd.partial"
    (stale / "x.aimodel").mkdir(parents=True)
    model = load_gemma4(work / "ck", "input-mask-blend", CAPACITY)
    export_gemma4(model, tmp_path / "x.aimodel", chunk=CHUNK)
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.aimodel"]


def test_a_failed_export_leaves_no_directories(work, tmp_path):
    from zoo.core.export.convert import export

    class Broken(__import__("torch").nn.Module):
        def forward(self, x):
            return x.numpy()  # not traceable

    import torch

    with pytest.raises(Exception):  # noqa: B017 - any export error
        export(
            Broken(),
            (torch.ones(2),),
            tmp_path / "a" / "b" / "x.aimodel",
            input_names=["x"],
            output_names=["y"],
        )
    assert not (tmp_path / "a").exists()


def test_export_refuses_repeated_names(tmp_path):
    import torch

    from zoo.core.export.convert import export

    class Add(torch.nn.Module):
        def forward(self, x, acc):
            acc.add_(x)
            return acc * 1.0

    with pytest.raises(ValueError, match=r"\['acc'\] named more than once"):
        export(
            Add(),
            (torch.ones(2), torch.zeros(2)),
            tmp_path / "x.aimodel",
            input_names=["x"],
            output_names=["acc"],
            state_names=["acc"],
        )


def test_records_merge_refuses_a_platform_that_is_a_path(tmp_path):
    from zoo.core.io.records import RecordError, merge

    source = tmp_path / "records"
    source.mkdir()
    provenance = {
        "platform": "../../x",
        "machine": "m",
        "packages": {},
        "date": "d",
        "compute_unit": "gpu",
    }
    (source / "r.json").write_text(
        json.dumps({"name": "r", "provenance": provenance, "results": {}})
    )
    with pytest.raises(RecordError, match="not a plain name"):
        merge(source, tmp_path / "devices")
    (source / "r.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="a record is a JSON object"):
        merge(source, tmp_path / "devices")
    assert not (tmp_path / "devices").exists() and not (tmp_path.parent / "x").exists()


def test_isolated_exit_codes_and_paths_are_reported(tmp_path):
    from zoo.core.isolate import run_isolated

    outcome = run_isolated(sys.exit, 3)
    assert outcome.status == "error" and "sys.exit(3)" in outcome.detail
    outcome = run_isolated(sys.exit, 0)
    assert outcome.status == "error" and "sys.exit(0)" in outcome.detail
    assert run_isolated(os.path.isdir, tmp_path).result is True


def test_a_raw_in_step_outside_the_cache_is_refused(assets):
    import numpy as np

    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.host.runtime import Model, RuntimeInputError

    asset = assets["kv-sharing", "runtime-index"]
    with Model.load(asset) as model:
        decode = model.function("decode")
        spec = DecodeSpec(**read_metadata(asset)["decode"])
        inputs = {"input_ids": np.array([[2]], np.int32), **spec.host_inputs(0, 1)}
        inputs["in_step"] = np.array([spec.capacity], np.int32)  # one past the end
        with pytest.raises(RuntimeInputError, match="outside the cache of 64 positions"):
            decode(inputs, decode.new_states())
        inputs["in_step"] = np.array([0], np.int32)
        assert decode(inputs, decode.new_states())["logits"].shape[-1] == spec.vocab_size


def test_an_asset_is_self_contained(work, tmp_path, capfd):
    """An asset generates from a prompt with its checkpoint gone, and its metadata holds no
    path of this machine."""
    moved = tmp_path / "elsewhere" / "g4.aimodel"
    shutil.copytree(work / "g4.aimodel", moved)
    text = (moved / "metadata.json").read_text()
    assert str(Path.home()) not in text and "/tmp/" not in text and str(work) not in text
    files = read_metadata(moved)["files"]
    assert "tokenizer.json" in files  # copied, listed, checked like the program
    assert (
        run("gemma4", ["generate", str(moved), "--prompt", "w2 w17", "--max-new-tokens", "2"]) == 0
    )
    assert len(capfd.readouterr().out.split()) == 2


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_is_named(work, prompt, capsys, monkeypatch):
    monkeypatch.chdir(work)
    assert run("gemma4", ["generate", "g4.aimodel", "--prompt", prompt]) == 2
    assert "the prompt is empty" in capsys.readouterr().err


def test_a_prompt_that_is_not_utf8_is_named(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    undecodable = b"caf\xe9".decode("utf-8", "surrogateescape")  # as argv holds bad bytes
    assert run("gemma4", ["generate", "g4.aimodel", "--prompt", undecodable]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err


def test_a_chat_template_syntax_error_names_the_file(work, tmp_path, capsys, monkeypatch):
    asset = tmp_path / "chat.aimodel"
    shutil.copytree(work / "g4.aimodel", asset)
    (tmp_path / "tokenizer.json").write_bytes((asset / "tokenizer.json").read_bytes())
    (tmp_path / "chat_template.jinja").write_text("{% for m in messages %}{{ m")
    line = ["generate", str(asset), "--chat", "--prompt", "hi", "--tokenizer"]
    assert run("gemma4", [*line, str(tmp_path / "tokenizer.json")]) == 2
    err = capsys.readouterr().err
    assert "chat_template.jinja: the chat template has a syntax error (line 1" in err


def test_an_unknown_zoo_verify_is_refused(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    monkeypatch.setenv("ZOO_VERIFY", "bogus")
    assert run("gemma4", ["generate", "g4.aimodel", "--prompt-ids", "2"]) == 2
    assert "ZOO_VERIFY='bogus'" in capsys.readouterr().err


def test_export_checks_the_room_before_loading(work, tmp_path, capsys, monkeypatch):
    import zoo.core.export.convert as export_module

    monkeypatch.setattr(
        export_module.shutil, "disk_usage", lambda p: type("U", (), {"free": 3_000_000})()
    )
    loaded = []
    monkeypatch.setattr("zoo.core.model.entry.ModelEntry.load", lambda *a, **k: loaded.append(1))
    assert run("gemma4", ["export", str(work / "ck"), str(tmp_path / "x.aimodel")]) == 2
    assert "3.00 MB free" in capsys.readouterr().err and not loaded


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_write_failing_in_native_code_leaves_nothing(work, tmp_path):
    """A file size limit (as a full disk would) stops the native writer with "LLVM ERROR: IO
    failure" and exit(1), past Python's cleanup: the watcher removes the staging folder and
    the folders made for it, and does not guess the cause."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    out = tmp_path / "full"
    out.mkdir()
    command = [sys.executable, "-m", "zoo.gemma4", "export", str(work / "ck")]
    command += [str(out / "new" / "x.aimodel"), "--capacity", "32", "--chunk", "4"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, preexec_fn=small_files
    )
    assert done.returncode != 0
    for _ in range(50):  # the watcher wakes when the process has gone
        if not list(out.iterdir()):
            break
        time.sleep(0.1)
    assert list(out.iterdir()) == [], done.stderr
    assert "the partial asset and the folders made for it were removed" in done.stderr
    assert "full disk?" not in done.stderr
