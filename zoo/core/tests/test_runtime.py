from __future__ import annotations

import asyncio
import gc

import numpy as np
import pytest

from zoo.core.host.runtime import Model, RuntimeInputError, os_framework_available, states_to_numpy

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

X = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
IDS = np.array([3, 0], np.int32)


@pytest.fixture(scope="module")
def model(tiny_asset):
    with Model.load(tiny_asset) as loaded:
        yield loaded


def test_runs_and_carries_state(model):
    step = model.function("main")
    states = step.new_states()
    for n in (1, 2, 3):
        out = step({"x": X, "ids": IDS}, states)
        np.testing.assert_allclose(out["acc_out"], 2.0 * n * X)
    np.testing.assert_allclose(out["picked"], [4.0, 1.0])
    np.testing.assert_allclose(states_to_numpy(states)["acc"], 6.0 * X)


def test_two_functions_share_state(model):
    assert sorted(model.function_names) == ["main", "read"]
    step, read = model.function("main"), model.function("read")
    states = step.new_states()
    step({"x": X, "ids": IDS}, states)
    np.testing.assert_allclose(read({}, states)["total"], [20.0])


def test_accepts_torch_tensors_and_initial_states(model):
    import torch

    step = model.function("main")
    states = step.new_states(acc=np.ones((1, 4), np.float32))
    out = step({"x": torch.from_numpy(X), "ids": torch.from_numpy(IDS)}, states)
    np.testing.assert_allclose(out["acc_out"], 1.0 + 2.0 * X)


def test_int64_input_is_rejected_with_the_fix(model):
    step = model.function("main")
    with pytest.raises(RuntimeInputError, match="'ids' is int64.*takes int32.*np.int32"):
        step({"x": X, "ids": IDS.astype(np.int64)}, step.new_states())


def test_missing_state_says_every_call_needs_it(model):
    step = model.function("main")
    with pytest.raises(
        RuntimeInputError, match=r"missing states \['acc'\].*every state.*new_states"
    ):
        step({"x": X, "ids": IDS})


def test_state_must_be_an_ndarray_the_runtime_can_write(model):
    step = model.function("main")
    with pytest.raises(RuntimeInputError, match="must be a coreai NDArray"):
        step({"x": X, "ids": IDS}, {"acc": np.zeros((1, 4), np.float32)})


def test_wrong_shape_dtype_and_names(model):
    step = model.function("main")
    states = step.new_states()
    with pytest.raises(RuntimeInputError, match=r"'x' has shape \(1, 5\), expected \(1, 4\)"):
        step({"x": np.zeros((1, 5), np.float32), "ids": IDS}, states)
    with pytest.raises(RuntimeInputError, match="'x' has dtype float64, expected float32"):
        step({"x": X.astype(np.float64), "ids": IDS}, states)
    with pytest.raises(RuntimeInputError, match=r"unknown inputs \['y'\]"):
        step({"x": X, "ids": IDS, "y": X}, states)
    with pytest.raises(RuntimeInputError, match=r"missing inputs \['ids'\]"):
        step({"x": X}, states)
    with pytest.raises(RuntimeInputError, match="no states named"):
        step.new_states(cache=np.zeros(1))
    with pytest.raises(RuntimeInputError, match="state 'acc' has shape"):
        step.new_states(acc=np.zeros((2, 4), np.float32))


def test_missing_function_lists_what_there_is(model):
    with pytest.raises(KeyError, match=r"no function 'decode'; it has \['main', 'read'\]"):
        model.function("decode")


def test_not_an_asset(tmp_path):
    with pytest.raises(FileNotFoundError, match="no asset at .*an asset is a folder"):
        Model.load(tmp_path / "missing.aimodel")
    (tmp_path / "file.aimodel").write_text("not an asset")
    with pytest.raises(FileNotFoundError, match="no asset at .*an asset is a folder"):
        Model.load(tmp_path / "file.aimodel")


@pytest.mark.skipif(os_framework_available(), reason="macOS: compute units are available")
def test_compute_units_need_the_os_framework(tiny_asset):
    with pytest.raises(RuntimeError, match="needs macOS 27"):
        Model.load(tiny_asset, compute_unit="gpu")
    with pytest.raises(ValueError, match="must be one of"):
        Model.load(tiny_asset, compute_unit="tpu")


def test_function_keeps_its_model_alive(tiny_asset):
    step = Model.load(tiny_asset).function("main")
    gc.collect()
    out = step({"x": X, "ids": IDS}, step.new_states())
    np.testing.assert_allclose(out["acc_out"], 2.0 * X)


def test_closed_model_says_so(tiny_asset):
    loaded = Model.load(tiny_asset)
    loaded.close()
    with pytest.raises(RuntimeError, match="was closed"):
        loaded.function("main")


def test_sync_calls_work_inside_a_running_event_loop(model):
    """Jupyter runs cells inside an event loop: asyncio.run() would refuse there."""

    async def cell():
        step = model.function("main")
        return step({"x": X, "ids": IDS}, step.new_states())["acc_out"]

    np.testing.assert_allclose(asyncio.run(cell()), 2.0 * X)


@pytest.mark.skipif(os_framework_available(), reason="macOS: compute units are available")
def test_the_default_compute_unit_comes_from_the_environment(tiny_asset, monkeypatch):
    monkeypatch.setenv("ZOO_COMPUTE_UNIT", "gpu")
    with pytest.raises(RuntimeError, match="compute unit 'gpu' needs macOS 27"):
        Model.load(tiny_asset)


def test_pytest_compute_unit_option_is_shown_in_the_header():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ZOO_COMPUTE_UNIT"}
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "--compute-unit", "cpu", __file__],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "compute unit cpu" in shown.stdout, shown.stdout + shown.stderr


def test_pytest_record_option_writes_records_with_provenance(tmp_path):
    import json
    import os
    import subprocess
    import sys

    test = tmp_path / "test_writes.py"
    test.write_text(
        "from zoo.testing import record\n"
        "def test_it():\n    record('demo', {'rows': [{'cell': 'a', 'outcome': 'ran exact'}]})\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RECORD_DIR"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "zoo.pytest_plugin",
            "--record",
            str(tmp_path / "out"),
            str(test),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((tmp_path / "out" / "demo.json").read_text())
    assert written["results"]["rows"][0]["outcome"] == "ran exact"
    assert written["provenance"]["compute_unit"] == "auto"
    assert written["provenance"]["packages"]["coreai-core"]


def test_the_macos_compute_unit_mapping_matches_the_runtime_api(monkeypatch):
    """The macOS branch, run here against the API's stubs: each compute unit asks for the
    specialization coreai-core declares (the calls themselves only run on a Mac)."""
    import ast
    import importlib.util
    from pathlib import Path

    import coreai.runtime

    import zoo.core.host.runtime as runtime

    stub = Path(importlib.util.find_spec("coreai.runtime").origin).with_suffix(".pyi")
    classes = {
        node.name: {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
        for node in ast.parse(stub.read_text()).body
        if isinstance(node, ast.ClassDef)
    }
    assert {"cpu", "gpu", "neural_engine"} <= classes["ComputeUnitKind"]
    assert {"cpu_only", "default", "from_preferred_compute_unit_kind"} <= {
        name for name in dir(coreai.runtime.SpecializationOptions)
    }

    class Kind:  # stands in for the macOS-only native ComputeUnitKind
        gpu = classmethod(lambda cls: "kind:gpu")
        neural_engine = classmethod(lambda cls: "kind:ane")

    options = coreai.runtime.SpecializationOptions
    from zoo.core.host import compute_unit

    monkeypatch.setattr(compute_unit, "os_framework_available", lambda: True)
    monkeypatch.setattr(coreai.runtime, "ComputeUnitKind", Kind, raising=False)
    monkeypatch.setattr(options, "default", classmethod(lambda cls: "default"))
    monkeypatch.setattr(options, "cpu_only", classmethod(lambda cls: "cpu only"))
    monkeypatch.setattr(
        options, "from_preferred_compute_unit_kind", classmethod(lambda cls, k: f"prefer {k}")
    )
    chosen = {unit: compute_unit.specialization(unit) for unit in runtime.COMPUTE_UNITS}
    assert chosen == {
        "auto": "default",
        "cpu": "cpu only",
        "gpu": "prefer kind:gpu",
        "ane": "prefer kind:ane",
    }
