"""Mixtures of experts on Core AI: Qwen3 MoE, Mixtral, GPT-OSS, Qwen3.5 MoE
and Gemma 4 26B-A4B, checkpoint ->
.aimodel -> greedy tokens, checked against transformers, computing the
chosen experts only or every expert. Tiny random checkpoints in the
released shapes; point `checkpoint` at a real directory for the real thing.

Run: python snippets/moe_quickstart.py
     (writes ./tiny-qwen3_moe/, ./tiny-mixtral/ and their assets)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 4 layers of 6 experts, 2 per token (30B-A3B: 48 layers of 128, 8 per
# token); qk-norm attention as dense Qwen3. Written by transformers.
checkpoint = make_tiny_checkpoint("qwen3_moe", "tiny-qwen3_moe")
# --8<-- [end:checkpoint]

# --8<-- [start:route]
import torch

from zoo import load

model = load(checkpoint, capacity=64)  # the entry from model_type: qwen3_moe
prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]  # 2 prefill chunks + 2 steps
first = model.layers[0]
with torch.no_grad():  # the router of layer 0 on the first four tokens
    h = first.post_attention_layernorm(model.embed(torch.tensor([prompt])))
    weights, experts = first.mlp.route(h[0, :4])
for token, chosen, weight in zip(
    prompt, experts.tolist(), weights.tolist(), strict=False
):
    pairs = zip(chosen, weight, strict=True)
    print(
        f"token {token:3}: "
        + ", ".join(f"expert {e} x {w:.2f}" for e, w in pairs)
    )
# --8<-- [end:route]

# --8<-- [start:export]
import zoo

plans = {
    experts: zoo.plan_export(
        checkpoint,
        f"tiny-qwen3_moe-{experts}.aimodel",
        capacity=64,
        chunk=4,
        experts=experts,
        overwrite=True,
    )
    for experts in ("chosen", "all")
}
print(plans["chosen"].describe())
assets = {experts: zoo.run_plan(plan) for experts, plan in plans.items()}
# --8<-- [end:export]

# --8<-- [start:generate]
from zoo import Generator, greedy_reference, reference_model

expected = greedy_reference(reference_model("qwen3_moe", checkpoint), prompt)
for experts, asset in assets.items():
    with Generator(asset) as generator:
        tokens = generator.generate(
            prompt, max_new_tokens=8, stop_token_ids=[]
        )
    assert tokens == expected, (experts, tokens, expected)
    print(f"{experts:6} experts: {tokens} 8/8 identical to transformers")
# --8<-- [end:generate]


# --8<-- [start:mixtral]
def export_and_compare(model: str, checkpoint) -> list[int]:
    """Export `checkpoint`, greedy-decode 8 tokens on the runtime, and check
    them against transformers' greedy decode of the same checkpoint."""
    path = f"{checkpoint}.aimodel"
    asset = zoo.export(checkpoint, path, capacity=64, chunk=4)
    with Generator(asset) as generator:
        tokens = generator.generate(prompt, 8, stop_token_ids=[])
    expected = greedy_reference(reference_model(model, checkpoint), prompt)
    assert tokens == expected, (model, tokens, expected)
    print(f"{model}: {tokens} 8/8 identical to transformers")
    return tokens


mixtral = make_tiny_checkpoint("mixtral", "tiny-mixtral")  # 8 experts, 2 each
export_and_compare("mixtral", mixtral)
# --8<-- [end:mixtral]

# --8<-- [start:gpt_oss]
# sinks, yarn RoPE, sliding layers (a window of 4) beside full ones; 8 stacked
# experts with biases and the clamped SwiGLU, 2 per token
gpt_oss = make_tiny_checkpoint("gpt_oss", "tiny-gpt_oss")
export_and_compare("gpt_oss", gpt_oss)
# --8<-- [end:gpt_oss]

# --8<-- [start:qwen3_5_moe]
# the Qwen3.5 hybrid (3 GatedDeltaNet layers to 1 attention) with 6 experts,
# 2 per token, beside a shared expert behind a sigmoid gate
qwen3_5_moe = make_tiny_checkpoint("qwen3_5_moe", "tiny-qwen3_5_moe")
export_and_compare("qwen3_5_moe", qwen3_5_moe)
# --8<-- [end:qwen3_5_moe]

# --8<-- [start:gemma4]
# Gemma 4 26B-A4B's design: 6 experts (2 per token) beside each layer's MLP,
# routed from the same residual, their own norms; experts stored stacked
gemma4 = make_tiny_checkpoint("gemma4", "tiny-gemma4-moe", "moe", seed=1)
export_and_compare("gemma4", gemma4)
# --8<-- [end:gemma4]

# --8<-- [start:router]
from zoo import get_preset
from zoo.core.model.eager import torch_logits


def routes(model, ids: list[int]) -> list[set]:
    """The experts each router picks for each token, every layer (eager)."""
    picked = []
    routers = [layer.mlp.gate for layer in model.layers]
    hooks = [
        r.register_forward_hook(
            lambda m, i, logits: picked.extend(
                set(row) for row in logits.topk(2).indices.tolist()
            )
        )
        for r in routers
    ]
    torch_logits(model, ids)
    for hook in hooks:
        hook.remove()
    return picked


text = [(7 * i + 3) % 120 + 4 for i in range(64)]  # 64 tokens
exact = routes(load(checkpoint, capacity=64), text)
int4 = load(checkpoint, capacity=64, compress="int4-block32")  # router fp32
also = load(checkpoint, capacity=64)
for layer in also.layers:  # the router compressed too, as any projection
    del layer.mlp.gate.is_router
get_preset("int4-block32").apply(also)
for name, model in (("router fp32", int4), ("router 4-bit too", also)):
    same = sum(a == b for a, b in zip(exact, routes(model, text), strict=True))
    print(
        f"int4-block32, {name:16}: {same / len(exact):.1%} of the "
        f"{len(exact)} token-layer routes as in fp32"
    )
# --8<-- [end:router]

# --8<-- [start:sizes]
import json

from zoo import get_entry, get_strategy
from zoo.core.export.fit import BYTES_PER_WEIGHT
from zoo.core.model.experts import MixtureOfExperts
from zoo.released import released_configs


def parameters(model_name: str, name: str) -> tuple[int, int]:
    """All and active-per-token parameters of a released config, counted on
    the meta device (no memory): the experts a token does not use excluded,
    the embedding and the head included."""
    entry = get_entry(model_name)
    raw = json.loads(released_configs(model_name)[name].read_text())
    raw.pop("quantization_config", None)  # GPT-OSS counted as dequantized
    config = entry.config.from_dict(raw)
    with torch.device("meta"):
        decoder = entry.model(config, get_strategy("runtime-index"), 16)
    total = sum(p.numel() for p in decoder.parameters())
    idle = sum(  # each layer's experts but the top_k a token uses
        sum(p.numel() for p in m.experts.parameters())
        * (1 - m.top_k / m.count)
        for m in decoder.modules()
        if isinstance(m, MixtureOfExperts)
    ) + sum(  # Gemma 4: the experts beside each layer's MLP
        sum(p.numel() for p in layer.experts.parameters())
        * (1 - layer.router.top_k / layer.experts.count)
        for layer in decoder.layers
        if getattr(layer, "moe", False)
    )
    return total, total - idle


for model_name, name in [
    ("qwen3_moe", "Qwen3-30B-A3B"),
    ("qwen3_moe", "Qwen3-235B-A22B"),
    ("gpt_oss", "gpt-oss-20b"),
    ("gpt_oss", "gpt-oss-120b"),
    ("mixtral", "Mixtral-8x7B-v0.1"),
    ("mixtral", "Mixtral-8x22B-v0.1"),
    ("qwen3_5_moe", "Qwen3.5-35B-A3B"),
    ("qwen3_5_moe", "Qwen3.5-122B-A10B"),
    ("gemma4", "gemma-4-26B-A4B-it"),
]:
    total, active = parameters(model_name, name)
    fp32, int4 = (
        total * BYTES_PER_WEIGHT[p] / 2**30 for p in ("fp32", "int4-block32")
    )
    print(
        f"{name:19} {total / 1e9:5.1f}B parameters, {active / 1e9:4.1f}B"
        f" active, {fp32:4.0f} GiB fp32, {int4:3.0f} GiB int4-block32"
    )
# --8<-- [end:sizes]
