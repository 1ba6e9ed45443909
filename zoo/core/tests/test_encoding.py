"""`--encoding plain | plain-fp32`: the codes, scales and offsets a coreai-opt preset chose,
expanded by ordinary graph ops. "plain" gives bit-identical weights for every preset that
stores integer codes, "plain-fp32" weights within half an fp16 step; both assets decode on
the runtime like the coreai-opt asset."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrize

from zoo.core.compression.encoding import PlainEmbedding, PlainLinear, encode_plain
from zoo.core.export.plan import plan_export
from zoo.core.model.entry import get_entry
from zoo.reference import make_tiny_checkpoint

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

# projections of 512 x 512 and more: the converter folds smaller constant expressions into
# float32 (a 256 x 512 one came out at 4 bytes a weight), so these reach the runtime as codes
WIDE = {"hidden_size": 512, "intermediate_size": 512, "num_attention_heads": 8}
PRESETS = ["int8", "int4-block32", "int4-block64", "gptq:int4-block32", "mixed:layers.0"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("encoding") / "ck"
    return make_tiny_checkpoint("llama", folder, num_hidden_layers=2, **WIDE)


def loaded(checkpoint, preset: str):
    calibration = [list(range(1, 60)), list(range(60, 120))] if preset.startswith("gptq") else None
    return get_entry("llama").load(
        checkpoint, capacity=32, compress=preset, calibration=calibration
    )


@pytest.mark.parametrize("preset", PRESETS)
def test_plain_weights_are_the_presets_bit_for_bit(checkpoint, preset):
    model = loaded(checkpoint, preset)
    stored = {
        n: m.weight.detach().clone()
        for n, m in model.named_modules()
        if parametrize.is_parametrized(m)
    }
    ids = torch.tensor([[3, 7, 11]])
    rows = model.embed_tokens(ids).detach().clone()
    encode_plain(model, "plain")
    plain = {n: m for n, m in model.named_modules() if isinstance(m, (PlainLinear, PlainEmbedding))}
    # a tied head gets its own copy of the table's codes, [in, out]
    assert torch.equal(plain.pop("lm_head").weight, stored["embed_tokens"])
    assert plain.keys() == stored.keys() and len(plain) == 2 * 7 + 1
    for name, module in plain.items():
        assert torch.equal(module.weight, stored[name]), name
        assert module.stored.codes.dtype in (torch.uint8, torch.int8)  # codes, one a byte
    assert torch.equal(model.embed_tokens(ids), rows)  # a looked-up row: the table's row


def test_plain_fp32_weights_are_within_an_fp16_step_of_the_presets(checkpoint):
    # coreai-opt rounds q * s, then + m, to fp16; float32 arithmetic does not round: each
    # weight differs by at most a step of fp16 at the block's magnitude (|q * s| + |m|)
    model = loaded(checkpoint, "int4-block32")
    stored = {
        n: m.weight.detach().clone()
        for n, m in model.named_modules()
        if parametrize.is_parametrized(m)
    }
    encode_plain(model, "plain-fp32")
    checked = 0
    stored["lm_head"] = stored["embed_tokens"]  # the tied head's own copy of the table
    for name, module in model.named_modules():
        if isinstance(module, PlainLinear):
            codes = module.stored
            blocks = codes.scale.shape[0]
            per_block = codes.scale.float().abs() * 15 + codes.minval.float().abs()  # [blocks, out]
            magnitude = per_block.repeat_interleave(codes.codes.shape[0] // blocks, 0).T
            gap = (module.weight - stored[name]).abs()
            assert bool((gap <= torch.finfo(torch.float16).eps * magnitude).all()), name
            assert not torch.equal(module.weight, stored[name])  # it does not round
            checked += 1
    assert checked == 14 + 1  # the projections and the head


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"compress": "palettize4", "encoding": "plain"}, "palettize4 stores none"),
        ({"compress": "fp32", "encoding": "plain-fp32"}, "fp32 stores none"),
        ({"compress": "int8", "encoding": "plain", "target": "apple-engine"}, "drop --encoding"),
        ({"compress": "int8", "encoding": "packed"}, "--encoding is one of"),
    ],
)
def test_what_holds_no_codes_is_refused(checkpoint, tmp_path, options, named):
    with pytest.raises(ValueError, match=named):
        plan_export(
            checkpoint, tmp_path / ("bundle" if "target" in options else "x.aimodel"), **options
        )


@pytest.fixture(scope="module")
def assets(checkpoint, tmp_path_factory):
    from zoo.core.export.run import run_plan

    folder = tmp_path_factory.mktemp("encoded")
    made = {}
    for preset, encoding in [
        ("int4-block32", "coreai-opt"),
        ("int4-block32", "plain"),
        ("int4-block32", "plain-fp32"),
        ("int8", "plain"),
    ]:
        plan = plan_export(
            checkpoint,
            folder / f"{preset}-{encoding}.aimodel",
            capacity=32,
            chunk=4,
            compress=preset,
            encoding=encoding,
        )
        made[preset, encoding] = run_plan(plan)
    return made


def test_encoded_assets_decode_like_the_coreai_opt_asset(assets, checkpoint):
    from zoo.core.host.generator import runtime_feed_logits, runtime_greedy
    from zoo.core.isolate import run_isolated

    prompt = [1, 5, 9, 13, 17]
    want = run_isolated(runtime_greedy, str(assets["int4-block32", "coreai-opt"]), prompt, 8)
    got = run_isolated(runtime_greedy, str(assets["int4-block32", "plain"]), prompt, 8)
    assert want.ok and got.ok, (want.summary(), got.summary())
    # the same weights: the same tokens, logits equal but for the order of the arithmetic
    assert got.result["tokens"] == want.result["tokens"]
    assert np.abs(np.array(got.result["logits"]) - want.result["logits"]).max() < 1e-4
    # float32 arithmetic moves weights by up to an fp16 step (a random model's logits by
    # tenths): the asset computes what its own eager model computes
    from zoo.core.model.eager import torch_logits

    run = run_isolated(runtime_feed_logits, str(assets["int4-block32", "plain-fp32"]), [prompt])
    assert run.ok, run.summary()
    eager = encode_plain(loaded(checkpoint, "int4-block32"), "plain-fp32")
    want_row = torch_logits(eager, prompt)[0, -1].detach().numpy()
    assert np.abs(np.array(run.result["logits"][-1]) - want_row).max() < 1e-3
    int8 = run_isolated(runtime_greedy, str(assets["int8", "plain"]), prompt, 8)
    assert int8.ok, int8.summary()
    for key, path in assets.items():
        metadata = json.loads((path / "metadata.json").read_text())
        assert metadata["creatorDefinedMetadata"]["zoo"]["decode"]["encoding"] == key[1]


def test_a_plain_int4_asset_holds_codes_not_floats(assets):
    def size(path):
        return sum(f.stat().st_size for f in path.iterdir() if f.is_file())

    coreai_opt = size(assets["int4-block32", "coreai-opt"])
    plain = size(assets["int4-block32", "plain"])
    # a byte a code against half a byte (and the converter folds tensors under 2^17
    # values, here k/v and the table, into float32): more than coreai-opt's, far less than
    # float32's 8 times
    assert coreai_opt < plain < 3.5 * coreai_opt, (coreai_opt, plain)
