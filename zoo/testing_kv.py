"""The int8 KV cache checked on an entry's tiny checkpoint (`zoo.core.model.kv_cache`): one helper,
called by the entries' tests, that exports with `TEST_LAYOUTS["int8-kv"]`."""

from __future__ import annotations

from zoo.testing import ExportedAssets


def check_int8_kv_cache(
    model: str, checkpoints: dict, assets: ExportedAssets, variant: str, strategy: str
) -> None:
    """The asset with an int8 KV cache stores int8 codes and a scale a head and position,
    and computes on the runtime what eager computes with the same int8 cache, over prefill
    chunks and single steps; close to the fp32 cache's logits, not equal to them."""
    import numpy as np

    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.host.generator import runtime_feed_logits
    from zoo.core.isolate import run_isolated
    from zoo.core.model.eager import decode_spec, torch_logits
    from zoo.core.model.entry import get_entry
    from zoo.core.model.kv_cache import kv_caches, set_kv_cache

    asset = assets[variant, strategy, "int8-kv"]
    spec = DecodeSpec.of_asset(asset)
    codes = [n for n in spec.state_shapes if n.startswith(("k_cache_", "v_cache_"))]
    assert codes and spec.state_dtypes == dict.fromkeys(codes, "int8") and spec.kv_cache == "int8"
    for name in codes:  # one scale a head and position: 1 on the head's axis
        shape, scale = spec.state_shapes[name], spec.state_shapes[name.replace("_cache", "_scale")]
        differs = [(a, b) for a, b in zip(shape, scale, strict=True) if a != b]
        assert len(differs) == 1 and differs[0][1] == 1, (shape, scale)
    chunk = spec.chunk
    pieces = [[(7 * i + 3) % 97 + 1 for i in range(2 * chunk + 1)], [5], [9, 11], [4, 8]]
    got = run_isolated(runtime_feed_logits, str(asset), pieces, timeout=300)
    fp32 = run_isolated(runtime_feed_logits, str(assets[variant, strategy]), pieces, timeout=300)
    assert got.ok and fp32.ok, (got.summary(), fp32.summary())
    loaded = get_entry(model).load(checkpoints[variant], strategy, spec.capacity)
    caches = {cache.layer: cache for cache in kv_caches(loaded)}.values()  # shared: once
    fp32_bytes = decode_spec(loaded).kv_bytes_per_token()
    set_kv_cache(loaded, "int8")
    assert fp32_bytes == sum(2 * c.kv_heads * c.head_dim * 4 for c in caches)
    assert spec.kv_bytes_per_token() == sum(2 * c.kv_heads * (c.head_dim + 4) for c in caches)
    ids = [token for piece in pieces for token in piece]
    rows = torch_logits(loaded, ids)[0].numpy()
    ends = np.cumsum([len(piece) for piece in pieces]) - 1
    runtime = np.array(got.result["logits"]).reshape(len(pieces), -1)
    assert np.abs(runtime - rows[ends]).max() < 1e-4  # the asset computes what eager does
    plain = np.array(fp32.result["logits"]).reshape(len(pieces), -1)
    gap = np.abs(runtime - plain).max()
    assert 0 < gap < 0.05 * np.abs(plain).max(), gap  # quantized, and close
