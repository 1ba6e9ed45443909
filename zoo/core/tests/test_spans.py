"""Attention spans (zoo.core.asset.decode_spec.DecodeSpec.spans): which function the host calls, the
masks it builds for it, and what the attention reads. The runtime side (every span's
function computing what the whole context computes) is each entry's test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.core.asset.decode_spec import DecodeSpec, check_spans
from zoo.core.model.layers import attend

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def spec(**fields) -> DecodeSpec:
    shapes = {"k_0": [1, 2, 64, 8], "v_0": [1, 2, 64, 8]}
    return DecodeSpec("llama", "runtime-index", 64, 4, 128, shapes, **fields)


def test_the_shortest_span_that_holds_the_step_is_called():
    spans = spec(spans=[8, 16])
    assert [spans.span_for(end) for end in (1, 8, 9, 16, 17, 64)] == [8, 8, 16, 16, 64, 64]
    assert spans.function_names("prefill", 8) == ["prefill_s8"]
    assert spans.function_names("decode", 64) == spans.function_names("decode") == ["decode"]
    ranged = spec(spans=[16], ranges=[[0, 1], [1, 2]])
    assert ranged.function_names("decode", 16) == ["decode_s16_0", "decode_s16_1"]
    assert spec().span_for(5) == 64  # no spans: the whole context


def test_a_span_s_masks_are_the_first_columns_of_the_whole_context_s():
    for fields in ({}, {"sliding_window": 6}):
        whole, spanned = spec(**fields), spec(spans=[16], **fields)
        for position, length in ((0, 4), (9, 1), (12, 4)):
            full = whole.host_inputs(position, length)
            narrow = spanned.host_inputs(position, length, 16)
            assert set(full) == set(narrow)
            for name, array in narrow.items():
                if name.endswith("mask"):
                    assert array.shape[-1] == 16
                    np.testing.assert_array_equal(array, full[name][..., :16])
                    # nothing a step may see lies past the span
                    assert (full[name][..., 16:] < -1e30).all()
                else:
                    np.testing.assert_array_equal(array, full[name])


def test_a_step_past_its_span_is_refused():
    with pytest.raises(ValueError, match="past an attention span of 16: call a longer"):
        spec(spans=[16]).host_inputs(14, 4, 16)


@pytest.mark.parametrize(
    "spans,named",
    [
        ([2], "from the prefill chunk \\(4\\) to below the capacity \\(64\\), got 2"),
        ([64], "got 64"),
        ([8.0], "got 8.0"),
        ([True], "got True"),
        ([16, 8], "ascending and distinct"),
        ([8, 8], "ascending and distinct"),
    ],
)
def test_spans_an_export_cannot_have_are_refused(spans, named):
    with pytest.raises(ValueError, match=named):
        check_spans(spans, 4, 64)


def test_damaged_spans_in_metadata_are_refused_and_old_metadata_loads(tmp_path):
    import json

    from zoo.core.asset.opened import METADATA_KEY

    def write(decode: dict) -> None:
        ours = {"creatorDefinedMetadata": {METADATA_KEY: {"decode": decode}}}
        (asset / "metadata.json").write_text(json.dumps(ours))

    asset = tmp_path / "a.aimodel"
    asset.mkdir()
    decode = {k: v for k, v in vars(spec()).items() if k != "spans"}  # before spans existed
    write(decode)
    assert DecodeSpec.of_asset(asset).spans is None
    write({**decode, "spans": [0]})
    with pytest.raises(ValueError, match="decode spec is damaged .*got 0.*export again"):
        DecodeSpec.of_asset(asset)


@pytest.mark.parametrize("keys_transposed", [False, True])
def test_attention_over_a_span_is_attention_over_the_whole_cache_masked(keys_transposed):
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 64, 8), torch.randn(1, 2, 64, 8)
    mask = torch.full((1, 1, 3, 64), float("-inf"))
    mask[..., :10] = 0.0
    keys = k.transpose(-1, -2) if keys_transposed else k
    whole = attend(q, keys, v, mask, keys_transposed=keys_transposed)
    narrow = attend(q, keys, v, mask[..., :16], keys_transposed=keys_transposed)
    torch.testing.assert_close(narrow, whole, rtol=0, atol=1e-6)
