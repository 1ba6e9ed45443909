"""Export layouts change how weights and key caches are stored, never what a model computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.core.asset.kv_writes import get_strategy
from zoo.core.model.kv_cache import KVCache, transposed_keys
from zoo.core.model.layers import GatedMLP, attend
from zoo.core.model.layout import (
    BlockedGatedMLP,
    BlockedLinear,
    TransposedLinear,
    apply_layout,
    default_layout,
    layout_of,
    resolve_layout,
)

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


def test_platform_defaults_and_bad_names():
    assert default_layout("linux") == {"weights": "blocked", "keys": "bhdt"}
    assert default_layout("darwin") == {"weights": "linear", "keys": "bhtd"}
    assert resolve_layout("linear", "bhtd") == {"weights": "linear", "keys": "bhtd"}
    with pytest.raises(ValueError, match="weights layout must be"):
        resolve_layout("columns")
    with pytest.raises(ValueError, match="keys layout must be"):
        resolve_layout("auto", "tdhb")


def test_transposed_linear_computes_what_linear_computes():
    torch.manual_seed(0)
    linear = nn.Linear(8, 5)
    x = torch.randn(2, 3, 8)
    transposed = TransposedLinear.from_weight(linear.weight, linear.bias)
    assert transposed.weight_t.shape == (8, 5)
    torch.testing.assert_close(transposed(x), linear(x))


class TiedToy(nn.Module):
    """The shape of a zoo model: an embedding, a projection, a tied head, a layer's cache."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(11, 6)
        self.proj = nn.Linear(6, 6, bias=False)
        self.lm_head = None
        self.attention = nn.Module()
        self.attention.cache = KVCache(get_strategy("runtime-index"), 0, 2, 8, 4)

    def forward(self, ids):
        h = self.proj(self.embed_tokens(ids))
        if self.lm_head is None:
            return nn.functional.linear(h, self.embed_tokens.weight)
        return self.lm_head(h)


def test_apply_layout_is_in_place_idempotent_and_keeps_the_numbers():
    model, ids = TiedToy(), torch.tensor([[1, 4, 9]])
    before = model(ids)
    assert layout_of(model) == {"weights": "linear", "keys": "bhtd"}
    assert apply_layout(model, "linear", "bhtd") == {"weights": "linear", "keys": "bhtd"}
    assert layout_of(model) == {"weights": "linear", "keys": "bhtd"}  # nothing changed

    apply_layout(model, "transposed", "bhdt")
    assert isinstance(model.proj, TransposedLinear)
    assert model.lm_head.weight_t.shape == (6, 11)  # the tied head got its own copy
    assert model.attention.cache.keys_transposed
    assert model.attention.cache.shapes() == {"k_cache_0": (1, 2, 4, 8), "v_cache_0": (1, 2, 8, 4)}
    torch.testing.assert_close(model(ids), before)
    apply_layout(model, "transposed", "bhdt")  # again: nothing to do
    torch.testing.assert_close(model(ids), before)
    assert layout_of(model) == {"weights": "transposed", "keys": "bhdt"}


def test_grouped_attention_with_keys_stored_transposed():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    mask = torch.where(torch.rand(1, 1, 3, 5) > 0.3, 0.0, float("-inf"))
    mask[..., 0] = 0.0  # every query sees at least one key
    # The reference: repeat each key/value head for its query heads.
    kr, vr = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    scores = q @ kr.transpose(-1, -2) * 8**-0.5 + mask
    want = torch.softmax(scores, -1) @ vr
    torch.testing.assert_close(attend(q, k, v, mask), want)
    torch.testing.assert_close(attend(q, k.transpose(2, 3), v, mask, keys_transposed=True), want)
    torch.testing.assert_close(attend(q, k, v, mask[0, 0]), want)  # a [T, S] mask


@pytest.mark.parametrize("name", ["runtime-index", "input-mask-blend"])
@pytest.mark.parametrize("length", [1, 3])
def test_chunk_strategies_write_transposed_key_caches(name, length):
    strategy, capacity = get_strategy(name), 8
    step = {k: torch.from_numpy(v) for k, v in strategy.host_inputs(2, capacity, length).items()}
    column = torch.randn(1, 2, length, 4)
    cache = torch.randn(1, 2, capacity, 4)
    cache_t = cache.transpose(2, 3).contiguous()
    assert cache_t.shape == transposed_keys(tuple(cache.shape))
    strategy.write(cache, column, step)
    strategy.write(cache_t, column.transpose(2, 3), step, time_axis=3)
    torch.testing.assert_close(cache_t, cache.transpose(2, 3))


@pytest.mark.parametrize("width, blocks", [(12288, [3072] * 4), (6144, [3072] * 2), (3584, [3584])])
def test_blocked_mlp_computes_the_mlp_in_even_blocks(width, blocks):
    torch.manual_seed(0)
    mlp = GatedMLP(16, width, nn.functional.silu)
    x = torch.randn(1, 3, 16)
    blocked = BlockedGatedMLP(mlp)
    assert [gate.shape[1] for gate in blocked.gates] == blocks
    assert [down.shape[0] for down in blocked.downs] == blocks
    torch.testing.assert_close(blocked(x), mlp(x), atol=1e-5, rtol=1e-5)
    holder = nn.Module()
    holder.mlp = mlp
    apply_layout(holder, "transposed", "bhtd")  # blocking a transposed MLP works too
    apply_layout(holder, "blocked", "bhtd")
    assert isinstance(holder.mlp, BlockedGatedMLP)
    assert layout_of(holder)["weights"] == "blocked"
    torch.testing.assert_close(holder.mlp(x), mlp(x), atol=1e-5, rtol=1e-5)


class WideToy(nn.Module):
    """A projection and a tied head wider than a block, a narrow projection between."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(8000, 16)
        self.wide = nn.Linear(16, 4000)
        self.narrow = nn.Linear(4000, 16, bias=False)
        self.lm_head = None

    def forward(self, ids):
        h = self.narrow(self.wide(self.embed_tokens(ids)))
        if self.lm_head is None:
            return nn.functional.linear(h, self.embed_tokens.weight)
        return self.lm_head(h)


def assert_layout_keeps_the_function(model, ids, layout: str, tmp_path) -> None:
    """`model` in `layout` computes what it computed before, in torch and on the runtime."""
    from zoo.core.export.convert import export
    from zoo.core.host.runtime import Model

    with torch.no_grad():
        before = model(ids)
    apply_layout(model, layout, "bhtd")
    assert layout_of(model)["weights"] == layout
    with torch.no_grad():
        torch.testing.assert_close(model(ids), before, atol=1e-5, rtol=1e-5)
    asset = tmp_path / f"{layout}.aimodel"
    export(model, (ids,), asset, input_names=["ids"], output_names=["logits"])
    with Model.load(asset) as loaded:
        got = loaded.function("main")({"ids": ids.numpy().astype("int32")}, {})["logits"]
    torch.testing.assert_close(torch.from_numpy(got), before, atol=1e-4, rtol=1e-4)


def test_blocked_layout_cuts_every_projection_wider_than_a_block_and_exports(tmp_path):
    torch.manual_seed(0)
    model = WideToy().eval()
    assert_layout_keeps_the_function(model, torch.tensor([[1, 4, 7999]]), "blocked-wide", tmp_path)
    assert isinstance(model.wide, BlockedLinear) and isinstance(model.lm_head, BlockedLinear)
    assert [piece.shape for piece in model.wide.blocks] == [(16, 2000)] * 2
    assert [piece.shape[1] for piece in model.lm_head.blocks] == [2667, 2667, 2666]
    assert isinstance(model.narrow, TransposedLinear)  # 16 wide: whole


class MLPToy(nn.Module):
    """A projection, a gated MLP and a head: every kind of module a layout re-stores."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(64, 16)
        self.proj = nn.Linear(16, 16)
        self.mlp = GatedMLP(16, 40, nn.functional.silu)
        self.lm_head = nn.Linear(16, 64, bias=False)

    def forward(self, ids):
        return self.lm_head(self.mlp(self.proj(self.embed_tokens(ids))))


def test_rows_as_a_batch_computes_the_same_and_exports(tmp_path):
    torch.manual_seed(0)
    model = MLPToy().eval()
    assert_layout_keeps_the_function(model, torch.tensor([[1, 4, 63, 9]]), "blocked-rows", tmp_path)
    assert model.proj.rows and model.lm_head.rows and model.mlp.rows


def test_weight_first_prefill_computes_the_same_at_one_row_and_at_a_chunk(tmp_path):
    """Rows below WEIGHT_FIRST_ROWS take `x @ W_t`, a chunk `(W @ x^T)^T`: both the same."""
    from zoo.core.model.layout import WEIGHT_FIRST_ROWS

    torch.manual_seed(0)
    for length in (1, WEIGHT_FIRST_ROWS):
        model = MLPToy().eval()
        ids = torch.randint(0, 64, (1, length))
        assert_layout_keeps_the_function(model, ids, "weight-first-prefill", tmp_path / str(length))
        assert model.proj.weight.shape == (16, 16) and model.proj.weight_t.shape == (16, 16)
