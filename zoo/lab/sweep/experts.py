"""Mixtures of experts given counts, routers and experts that do not fit: `zoo export`.

Each case edits a copy of a tiny checkpoint of one expert family (config.json fields, or
its tensors: one removed, misshapen or poisoned with NaN) and exports it with a capacity
of 32; the refusal must name the field or the tensor. A valid one, planned and exported,
must be done."""

from __future__ import annotations

import json
import math
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run, copied, planned

SURFACE = "experts"


def edited(bench: Bench, folder: Path, model: str, config=None, tensors=None) -> Path:
    """A copy of `model`'s tiny checkpoint, `config` fields set (a dict: None removes a
    field) and `tensors(dict)` applied to its weights."""
    checkpoint = copied(bench.checkpoint(model), folder, "ck")
    if config:
        path = checkpoint / "config.json"
        data = json.loads(path.read_text())
        text = data.get("text_config", data)  # a multimodal layout keeps the text's fields
        for key, value in config.items():
            if value is None:
                text.pop(key, None)
            else:
                text[key] = value
        path.write_text(json.dumps(data))
    if tensors:
        from safetensors.torch import load_file, save_file

        path = checkpoint / "model.safetensors"
        weights = load_file(path)
        tensors(weights)
        save_file(weights, path, metadata={"format": "pt"})
    return checkpoint


def export_run(checkpoint: Path, folder: Path, *options: str) -> Run:
    out = folder / "out.aimodel"
    return Run(["export", str(checkpoint), str(out), "--capacity", "32", "--chunk", "4", *options])


def case(
    name: str, model: str, names: tuple[str, ...], config=None, tensors=None, *options, **more
) -> Case:
    def make(bench: Bench, folder: Path) -> Run:
        return export_run(edited(bench, folder, model, config, tensors), folder, *options)

    return Case(SURFACE, f"{model}: {name}", make, names=names, **more)


def exported(folder: Path, result: Result) -> str | None:
    asset = folder / "out.aimodel"
    if not (asset / "metadata.json").exists():
        return "no asset written"
    return None


def dropped(name: str):
    return lambda weights: weights.pop(name)


def reshaped(name: str):
    def apply(weights) -> None:
        weights[name] = weights[name][..., :-1].contiguous()

    return apply


def poisoned(name: str, value: float):
    def apply(weights) -> None:
        weights[name] = weights[name].clone()
        weights[name].view(-1)[0] = value

    return apply


ROUTER = {
    "qwen3_moe": "model.layers.0.mlp.gate.weight",
    "mixtral": "model.layers.0.block_sparse_moe.gate.weight",
    "gpt_oss": "model.layers.0.mlp.router.weight",
    "qwen3_5_moe": "model.layers.0.mlp.gate.weight",
}
EXPERT = {
    "qwen3_moe": "model.layers.0.mlp.experts.1.up_proj.weight",
    "mixtral": "model.layers.0.block_sparse_moe.experts.1.w3.weight",
    "gpt_oss": "model.layers.0.mlp.experts.gate_up_proj",
    "qwen3_5_moe": "model.layers.0.mlp.experts.1.up_proj.weight",
}
COUNT = {
    "qwen3_moe": "num_local_experts",
    "mixtral": "num_local_experts",
    "gpt_oss": "num_local_experts",
    "qwen3_5_moe": "num_experts",
}


def unprefixed(name: str) -> str:
    """A tensor as a missing one is named: the decoder's own name, without `model.`."""
    return name.removeprefix("model.")


def family_cases(model: str) -> list[Case]:
    count, router, expert = COUNT[model], ROUTER[model], EXPERT[model]
    return [
        case(f"{count} 0", model, (count,), {count: 0}),
        case(f"{count} -2", model, (count,), {count: -2}),
        case(f"{count} 1,000,000", model, (count,), {count: 1_000_000}),
        case(f"{count} as text", model, (count,), {count: "6"}),
        case(f"{count} 2.5", model, (count,), {count: 2.5}),
        case("num_experts_per_tok 0", model, ("num_experts_per_tok",), {"num_experts_per_tok": 0}),
        case(
            "num_experts_per_tok above the experts",
            model,
            ("num_experts_per_tok",),
            {"num_experts_per_tok": 99},
        ),
        case("the router missing", model, (unprefixed(router),), tensors=dropped(router)),
        case("the router misshapen", model, (router,), tensors=reshaped(router)),
        case("an expert missing", model, (unprefixed(expert),), tensors=dropped(expert)),
        case("an expert misshapen", model, (expert,), tensors=reshaped(expert)),
        case("NaN in the router", model, ("NaN",), tensors=poisoned(router, math.nan)),
        case("inf in an expert", model, ("infinite",), tensors=poisoned(expert, math.inf)),
        case("planned", model, (), None, None, "--dry-run", works=True, check=planned),
    ]


CASES = [
    *family_cases("qwen3_moe"),
    *family_cases("mixtral"),
    *family_cases("gpt_oss"),
    *family_cases("qwen3_5_moe"),
    case(
        "moe_intermediate_size 0",
        "qwen3_moe",
        ("moe_intermediate_size",),
        {"moe_intermediate_size": 0},
    ),
    case(
        "moe_intermediate_size unlike the weights",
        "qwen3_moe",
        ("up_proj",),
        {"moe_intermediate_size": 48},
    ),
    case(
        "shared_expert_intermediate_size unlike the weights",
        "qwen3_5_moe",
        ("shared_expert",),
        {"shared_expert_intermediate_size": 16},
    ),
    case(
        "the shared expert's gate missing",
        "qwen3_5_moe",
        ("shared_expert_gate",),
        tensors=dropped("model.layers.0.mlp.shared_expert_gate.weight"),
    ),
    # a missing top-k takes transformers' default: 2 for Mixtral, above Qwen3's 6 experts
    case(
        "num_experts_per_tok missing, planned",
        "mixtral",
        (),
        {"num_experts_per_tok": None},
        None,
        "--dry-run",
        works=True,
        check=planned,
    ),
    case(
        "num_experts_per_tok missing, its default above the experts",
        "qwen3_moe",
        ("num_experts_per_tok",),
        {"num_experts_per_tok": None},
    ),
    case(
        "--experts all, exported",
        "qwen3_moe",
        (),
        None,
        None,
        "--experts",
        "all",
        works=True,
        check=exported,
    ),
    case(
        "--experts chosen, exported",
        "qwen3_moe",
        (),
        None,
        None,
        "--experts",
        "chosen",
        works=True,
        check=exported,
    ),
    case(
        "--experts chosen on a dense model",
        "llama",
        ("--experts",),
        None,
        None,
        "--experts",
        "chosen",
    ),
    case(
        "--experts of an unknown name", "qwen3_moe", ("--experts",), None, None, "--experts", "some"
    ),
]
