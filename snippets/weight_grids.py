"""Why a 4-bit format looks good or bad on the registry's weights: they were
4-bit already (GGUF Q4_1 / Q4_K: an affine grid per block of 32 inputs), so
int4-block32 reproduces them and every other format rounds them again.

Each format's relative weight error (|W' - W| / |W|) on real tensors, beside
Gaussian weights with the same row scales (weights without a grid).

Run: python snippets/weight_grids.py [--record DIR]   (seconds)
"""

import sys

# --8<-- [start:grids]
import torch
from safetensors import safe_open
from torch import nn

from zoo import get_preset
from zoo.core.compression.stores import stored_bits
from zoo.fetch import fetch


def error_and_bits(weight: torch.Tensor, preset: str) -> tuple[float, float]:
    """Relative error of `weight` stored by `preset`, and its bits a weight."""
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    linear.weight.data = weight.clone()
    stored = get_preset(preset).compress_module("layers.0.mlp.up_proj", linear)
    error = (stored.weight.detach().float() - weight).norm() / weight.norm()
    bits, weights = stored_bits(stored)
    return float(error), bits / weights


torch.manual_seed(0)
rows = []
for model, tensor in [
    ("smollm2-135m-instruct", "model.layers.3.self_attn.q_proj.weight"),
    ("smollm2-135m-instruct", "model.layers.20.mlp.down_proj.weight"),
    ("gemma3-270m", "model.layers.3.self_attn.q_proj.weight"),
    ("gemma3-270m", "model.layers.3.mlp.down_proj.weight"),
]:
    with safe_open(str(fetch(model) / "model.safetensors"), "pt") as f:
        weight = f.get_tensor(tensor).float()
    gaussian = torch.randn_like(weight) * weight.std(1, keepdim=True)
    for preset in ("int4-block32", "int4-block64", "palettize4"):
        real, bits = error_and_bits(weight, preset)
        smooth, _ = error_and_bits(gaussian, preset)
        rows.append(
            {
                "model": model,
                "tensor": tensor.removeprefix("model."),
                "preset": preset,
                "bits a weight": round(bits, 3),
                "error, registry weights": round(real, 4),
                "error, Gaussian weights": round(smooth, 4),
            }
        )
        row = rows[-1]
        print(
            f"{model} {row['tensor']} {preset}: "
            f"{row['error, registry weights']} (Gaussian "
            f"{row['error, Gaussian weights']})"
        )
# --8<-- [end:grids]

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    print(f"wrote {write_record(directory, 'weight-grids', {'rows': rows})}")
