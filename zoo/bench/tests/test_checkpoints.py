"""The bench's full-size checkpoints are written as the model repositories publish them:
checked at tiny widths (the released configs scaled down), against transformers."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from zoo.bench.checkpoints import released_config, write_random_checkpoint
from zoo.core.checkpoint.weights import safetensors_files
from zoo.core.model.eager import torch_logits
from zoo.core.model.entry import get_entry
from zoo.released import scale_down

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


@pytest.mark.parametrize(
    "model,released", [("gemma4", "gemma-4-E2B-it"), ("qwen3_5", "Qwen3.5-0.8B")]
)
def test_random_checkpoint_loads_in_transformers_and_in_the_zoo_alike(model, released, tmp_path):
    config = scale_down(released_config(model, released))
    checkpoint = write_random_checkpoint(model, config, tmp_path / "ck", shard_bytes=40_000)
    assert json.loads((checkpoint / "config.json").read_text()) == config
    shards = safetensors_files(checkpoint)  # through model.safetensors.index.json
    assert len(shards) > 1 and shards[0].name.endswith(f"-of-{len(shards):05d}.safetensors")
    from safetensors import safe_open

    for shard in shards:
        with safe_open(str(shard), framework="pt") as tensors:
            for key in tensors.keys():  # noqa: SIM118
                assert key.startswith("model.language_model."), key
                assert tensors.get_tensor(key).dtype == torch.bfloat16, key
    entry = get_entry(model)
    ours = entry.load(checkpoint, "runtime-index", 32)
    architecture = getattr(transformers, config["architectures"][0])
    reference = architecture.from_pretrained(  # bf16 as stored; both sides compute in fp32
        checkpoint, attn_implementation="eager", dtype=torch.float32
    ).eval()
    ids = [2, 17, 33, 91, 5, 77, 12, 9]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits
    assert torch.allclose(torch_logits(ours, ids), expected, atol=1e-4), (
        (torch_logits(ours, ids) - expected).abs().max()
    )
    # a second call reuses the complete checkpoint instead of rewriting it
    stamp = shards[0].stat().st_mtime_ns
    write_random_checkpoint(model, config, checkpoint)
    assert shards[0].stat().st_mtime_ns == stamp
