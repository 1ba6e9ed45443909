"""The plan of an export: options declared once (`zoo.core.export.options.EXPORT_OPTIONS`: the
command line, the Python keywords and their documentation are made from them), both targets
planned (a dry run of each writes nothing), the KV cache counted at the capacity, and a
line while a long step is silent."""

from __future__ import annotations

import inspect

import pytest

from zoo.core.cli.arguments import build_parser
from zoo.core.export.functions import export_model
from zoo.core.export.options import EXPORT_OPTIONS, OPTIONS_BY_NAME
from zoo.core.export.plan import plan_export

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers

COMMAND_ONLY = {"checkpoint", "output", "dry_run", "help", "debug"}


def test_the_command_line_is_made_from_the_declarations():
    _, commands = build_parser("zoo", "export")
    export = commands.choices["export"]
    dests = {action.dest for action in export._actions} - COMMAND_ONLY
    assert dests == {o.name for o in EXPORT_OPTIONS if o.cli}
    for action in export._actions:
        if action.dest in OPTIONS_BY_NAME:
            option = OPTIONS_BY_NAME[action.dest]
            assert action.option_strings == [option.spelled]
            assert action.default == option.default


def test_the_python_keywords_are_the_declarations():
    # no second list of options: the functions take **options, checked against the table
    for function in (plan_export, export_model):
        kinds = [p.kind for p in inspect.signature(function).parameters.values()]
        assert kinds[-1] is inspect.Parameter.VAR_KEYWORD
        for option in EXPORT_OPTIONS:
            if option.python and (option.model or function is plan_export):
                assert f"`{option.name}`" in function.__doc__


def test_an_unknown_keyword_is_refused_naming_the_options(tmp_path):
    with pytest.raises(TypeError, match=r"plan_export\(\) got unexpected keyword capcity; "):
        plan_export(tmp_path, tmp_path / "x.aimodel", capcity=64)


def test_export_model_refuses_what_the_checkpoint_decides(tmp_path):
    with pytest.raises(TypeError, match=r"export_model\(\) got unexpected keyword stream"):
        export_model(object(), tmp_path / "x.aimodel", stream="on")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from zoo.reference import make_tiny_checkpoint

    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("options") / "ck")


@pytest.mark.parametrize(
    ("target", "output", "shown"),
    [
        ("zoo", "tiny.aimodel", "prefill + decode"),
        ("apple-engine", "bundle", "main + prefill, in the contract of Apple's engine"),
    ],
)
def test_a_dry_run_of_either_target_prints_its_plan_and_writes_nothing(
    checkpoint, tmp_path, capsys, target, output, shown
):
    from zoo.command import main

    assert (
        main(["export", str(checkpoint), str(tmp_path / output), "--target", target, "--dry-run"])
        == 0
    )
    printed = capsys.readouterr()
    assert shown in printed.out and "dry run: nothing written" in printed.err
    assert list(tmp_path.iterdir()) == []


def test_the_engine_target_refuses_what_its_contract_has_not(checkpoint, tmp_path, capsys):
    from zoo.command import main

    for extra, named in [
        (["--verify", "4"], "--verify"),
        (["--keys-layout", "bhdt"], "--keys-layout"),
        (["--kv-cache", "int8"], "--kv-cache"),
    ]:
        argv = ["export", str(checkpoint), str(tmp_path / "b"), "--target", "apple-engine"]
        assert main([*argv, *extra, "--dry-run"]) == 2
        assert named in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_plan_counts_the_kv_cache_at_its_capacity(checkpoint, tmp_path):
    import json

    config = json.loads((checkpoint / "config.json").read_text())
    heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    per_token = config["num_hidden_layers"] * 2 * heads * head_dim  # keys and values
    for capacity in (256, 100_000):
        plan = plan_export(checkpoint, tmp_path / "x.aimodel", capacity=capacity)
        assert plan.state_bytes == per_token * capacity * 4  # float32
        assert f"at {capacity:,} tokens" in plan.describe()
    int8 = plan_export(checkpoint, tmp_path / "x.aimodel", capacity=256, kv_cache="int8")
    # int8 codes and a float32 scale per head and position
    scales = config["num_hidden_layers"] * 2 * heads * 256 * 4
    assert int8.state_bytes == per_token * 256 + scales
    first = plan_export(checkpoint, tmp_path / "x.aimodel", capacity=256, first_layers=1)
    assert first.state_bytes == per_token * 256 * 4 // config["num_hidden_layers"]


def test_a_silent_step_says_it_is_still_working():
    import threading
    import time

    from zoo.core.io.progress import still_working

    said: list[str] = []
    with still_working(said.append, "converting", every=0.05):
        time.sleep(0.28)
    count = len(said)
    assert 3 <= count <= 6 and said[0].startswith("  still converting (")
    time.sleep(0.15)  # and nothing after the block: the thread is gone
    assert len(said) == count
    assert not [t for t in threading.enumerate() if t.name == "zoo-progress"]
    with still_working(None, "converting", every=0.01):  # no progress callback: no thread
        assert not [t for t in threading.enumerate() if t.name == "zoo-progress"]
