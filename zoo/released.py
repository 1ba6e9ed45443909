"""Released config.json files, scaled down, as test checkpoints (needs `transformers`).

Our other test checkpoints are written by transformers' `save_pretrained`, which re-spells a
config (e.g. Gemma 4's `global_head_dim` becomes `per_layer_config`). Readers load the
files the model repositories publish, so each released size has its config.json under
`zoo/<model>/released/` in the published spelling, and `scale_down` shrinks it to tiny
widths keeping every field and its spelling. `check_released` builds a random-weight
checkpoint from it with transformers, writes the released-spelling config.json over the
re-saved one, and holds our loader, export and runtime decode to transformers.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from zoo.core.export.functions import export_model as export
from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.entry import all_entries, get_entry

MODELS = tuple(all_entries())  # every zoo model has released configs
ROOT = Path(__file__).resolve().parent
PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]  # 10 tokens: 2 prefill chunks of 4, then 2
CHUNK, CAPACITY, NEW_TOKENS = 4, 32, 8
RESULT_COLUMNS = (
    "greedy tokens on the runtime",
    "logits max abs error (runtime)",
    "stop ids",
)
STRATEGY = "input-mask-blend"  # the KV write reported to run on the macOS GPU too

# Text-config widths -> tiny values. Head counts, layer types, sharing, flags, RoPE and
# every spelling stay as released; the layer count is cut as `scale_down` says.
TINY_WIDTHS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "head_dim": 16,
    "global_head_dim": 32,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "vocab_size": 128,
    "vocab_size_per_layer_input": 128,
    "hidden_size_per_layer_input": 8,  # 0 (no per-layer embeddings) stays 0
    "sliding_window": 4,
    "num_experts": 4,
    "top_k_experts": 2,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 256,
}
# Towers the zoo does not load (vision, audio) shrink to one small layer.
TINY_TOWERS = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "depth": 1,
    "num_attention_heads": 2,
    "num_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "output_proj_dims": 32,
    "mm_embed_dim": 32,  # Gemma 4 12B's encoder-free image embedder
    "mm_posemb_size": 64,
    "subsampling_conv_channels": [8, 4],
}


WORD_SIZES = ("mini", "small", "medium")  # sizes named in words, smallest first


def release_order(name: str) -> tuple:
    """Sort key of a released model's name: family, then version, then size, as a reader
    scans a table: Llama-3.1 before Llama-3.2, SmolLM2-135M before SmolLM2-1.7B,
    gemma-4-E2B before gemma-4-12B, Phi-3-mini before Phi-3-medium before Phi-4; a name
    without a size (Phi-4, Mistral-Nemo-Instruct-2407) after the sizes of its version."""
    family = re.match(r"[A-Za-z]+", name)
    rest = name[family.end() :] if family else name
    # a version is the number right after the family, unless it is a size (Mistral-7B)
    version = re.match(r"-?(\d+(?:\.\d+)?)(?![\d.]*[BbMm])", rest)
    # a size: 7B, 1.7B, 135M, 270m, E2B (effective), 26B-A4B (its first, total, size)
    size = re.search(r"(?:^|-)E?(\d+(?:\.\d+)?)([BbMm])(?=-|$)", rest)
    billions = float(size[1]) / (1000 if size[2] in "Mm" else 1) if size else 1e9
    words = [WORD_SIZES.index(w) for w in name.lower().split("-") if w in WORD_SIZES]
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", rest)]
    return (
        family[0].lower() if family else "",
        float(version[1]) if version else 0.0,
        billions,
        words[0] if words else len(WORD_SIZES),
        numbers,
        name,
    )


def released_configs(model: str) -> dict[str, Path]:
    """Name -> path of each released config.json fixture of a zoo model."""
    directory = ROOT / model / "released"

    paths = sorted(directory.glob("*.json"), key=lambda path: release_order(path.stem))
    return {p.stem: p for p in paths if not p.name.endswith(".generation_config.json")}


def _period(text: dict) -> int:
    """Layers per repeat of the attention pattern (one full-attention layer each)."""
    kinds = text.get("layer_types") or []
    if "full_attention" in kinds:
        return kinds.index("full_attention") + 1
    pattern = text.get("sliding_window_pattern") or text.get("_sliding_window_pattern")
    # no pattern named (Llama): every layer is a full-attention layer
    return int(pattern or text.get("full_attention_interval", 1))


def scale_down(config: dict) -> dict:
    """A released config.json at tiny widths, every key spelled as it was.

    - text-config widths become `TINY_WIDTHS` (a zero stays zero), vision and audio towers
      `TINY_TOWERS`; where the head count does not divide the tiny hidden size (9 or 24
      heads) or sets the head dim, the hidden size is heads x the tiny head dim;
    - the layer count becomes one repeat of the attention pattern (the published
      `layer_types` cut to that length: every layer kind, ending on full attention; at
      least two layers), or two repeats where layers share KV (Gemma 4): the KV-shared
      layers shrink in proportion while at least one repeat keeps its own KV;
    - token ids past the tiny vocabulary move to its top ids, in order.
    """
    config = copy.deepcopy(config)
    text = config.get("text_config", config)
    layers = text["num_hidden_layers"]
    period = _period(text)
    kept = min(layers, 2 * period if text.get("num_kv_shared_layers") else max(period, 2))
    text["num_hidden_layers"] = kept
    if text.get("layer_types"):
        text["layer_types"] = text["layer_types"][:kept]
    if text.get("num_kv_shared_layers"):
        shared = round(text["num_kv_shared_layers"] * kept / layers)
        text["num_kv_shared_layers"] = max(1, min(shared, kept - period))
    # a window no shorter than the context (Phi-4-mini's 262144) never cuts: keep it so
    context = text.get("max_position_embeddings", 1 << 62)
    unbounded = (text.get("sliding_window") or 0) >= context
    for key, value in TINY_WIDTHS.items():
        if text.get(key):
            text[key] = value
    heads = text["num_attention_heads"]
    if "head_dim" not in text or text["hidden_size"] % heads:  # transformers checks both
        text["hidden_size"] = heads * TINY_WIDTHS["head_dim"]
    _scale_down_longrope(text, context)
    if unbounded:
        text["sliding_window"] = text["max_position_embeddings"]
    for tower in ("vision_config", "audio_config"):
        if isinstance(config.get(tower), dict):
            for key, value in TINY_TOWERS.items():
                if key in config[tower]:
                    config[tower][key] = value
            if "out_hidden_size" in config[tower]:
                config[tower]["out_hidden_size"] = text["hidden_size"]
    vocab = text["vocab_size"]
    _move_token_ids([config, text], vocab)
    return config


def _scale_down_longrope(text: dict, context: int) -> None:
    """longrope (Phi-3.5, Phi-4-mini): a factor per rotated frequency, so the lists are
    resampled to the tiny head; the pretraining context becomes the test cache (the
    short factors apply within it) and the context keeps its stretch over it."""
    rope = text.get("rope_scaling") or text.get("rope_parameters") or {}
    if rope.get("type", rope.get("rope_type")) not in ("longrope", "su"):
        return
    rotated = int(TINY_WIDTHS["head_dim"] * text.get("partial_rotary_factor", 1.0)) // 2
    for key in ("short_factor", "long_factor"):
        factors = rope[key]
        rope[key] = [factors[i * (len(factors) - 1) // (rotated - 1)] for i in range(rotated)]
    stretch = context / text["original_max_position_embeddings"]
    text["original_max_position_embeddings"] = CAPACITY
    text["max_position_embeddings"] = round(CAPACITY * stretch)


def _move_token_ids(objects: list[dict], vocab: int) -> None:
    ids = sorted(
        {
            token
            for obj in objects
            for key, value in obj.items()
            if key.endswith(("token_id", "token_index"))
            for token in (value if isinstance(value, list) else [value])
            if isinstance(token, int) and token >= vocab
        }
    )
    moved = {token: vocab - len(ids) + i for i, token in enumerate(ids)}
    for obj in objects:
        for key, value in obj.items():
            if key.endswith(("token_id", "token_index")):
                if isinstance(value, list):
                    obj[key] = [moved.get(t, t) for t in value]
                elif isinstance(value, int):
                    obj[key] = moved.get(value, value)


def write_checkpoint(config: dict, directory: Path, seed: int = 0) -> Path:
    """A random-weight checkpoint of `config` (built by transformers), whose config.json
    (and generation_config.json) are written as given, not as transformers re-spells them."""
    import torch
    import transformers

    from zoo.reference import store_experts_mxfp4, write_tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    hf_config = transformers.AutoConfig.from_pretrained(directory)
    torch.manual_seed(seed)
    model_class = getattr(transformers, config["architectures"][0])
    model = model_class._from_config(hf_config, attn_implementation="eager")
    with torch.no_grad():  # biases start at zero: jittered so that parity sees them (Qwen2)
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.add_(0.1 * torch.randn_like(parameter))
    transformers.utils.logging.disable_progress_bar()
    model.eval().save_pretrained(directory)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    (directory / "generation_config.json").unlink(missing_ok=True)
    if (config.get("quantization_config") or {}).get("quant_method") == "mxfp4":
        store_experts_mxfp4(directory)  # GPT-OSS's experts, stored as released
    text = config.get("text_config", config)
    write_tokenizer(directory, text["vocab_size"])
    return directory


def released_row(model: str, name: str, workdir: str | Path) -> dict:
    """`check_released`, computed once per test session for the zoo tests, the recipe and
    its record alike. It runs here (its runtime decode has a process of its own): one
    process per row would cost more start-up than many rows' export."""
    from zoo.core.isolate import cached_call, run_in_process

    released = json.loads(released_configs(model)[name].read_text())
    # sizes that scale down alike (a base model and its instruct tune) are one tiny model
    tiny = scale_down(released)
    outcome = cached_call(
        lambda: run_in_process(check_released, model, name, str(workdir)),
        ["released", *sorted(ROOT.rglob("*.py")), model, json.dumps(tiny, sort_keys=True)],
    )
    if not outcome.ok:
        return {"model": model, "released config": name, "outcome": outcome.summary()}
    layers = tiny_layers(released, tiny)
    return {**outcome.result, "released config": name, "layers (tiny)": layers}


def tiny_layers(released: dict, tiny: dict) -> str:
    """The released config's layers and its tiny copy's, as "48 (4)"."""
    layers = [c.get("text_config", c)["num_hidden_layers"] for c in (released, tiny)]
    return f"{layers[0]} ({layers[1]})"


def runtime_logits(asset: str, ids: list[int]) -> list[list[float]]:
    """The logits after each of `ids` on the Core AI runtime, fed one token at a time
    (teacher forcing: the row i scores the token after ids[: i + 1])."""
    from zoo.core.host.generator import Generator

    with Generator(asset) as generator:
        return [generator.feed([token]).tolist() for token in ids]


def check_released(model: str, name: str, workdir: str | Path) -> dict:
    """One row of the released-configs table: loaded and decoded like transformers, or
    refused with the reason."""
    import torch

    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.reference import greedy_reference_logits, logits_error

    released = json.loads(released_configs(model)[name].read_text())
    tiny = scale_down(released)
    row = {"model": model, "released config": name, "layers (tiny)": tiny_layers(released, tiny)}
    load = get_entry(model).load
    workdir = Path(workdir)
    checkpoint = write_checkpoint(tiny, workdir / name)
    try:
        ours = load(checkpoint, STRATEGY, CAPACITY)
    except UnsupportedConfig as error:
        blank = dict.fromkeys(RESULT_COLUMNS, "—")
        return {**row, "outcome": f"refused: {error}", **blank}
    reference = getattr(__import__("transformers"), tiny["architectures"][0]).from_pretrained(
        checkpoint, attn_implementation="eager", dtype=torch.float32
    )  # the stored weights are bf16 as released; both sides compute in fp32
    for placeholder in ("image_token_id", "audio_token_id", "video_token_id"):
        # a text decode: transformers' multimodal model would embed these ids as padding
        # (they stand for images and sounds), the zoo's text decoder as the tokens they are
        if getattr(reference.config, placeholder, None) is not None:
            setattr(reference.config, placeholder, -1)
    want_tokens, want_rows = greedy_reference_logits(reference.eval(), PROMPT, NEW_TOKENS)
    asset = export(ours, workdir / f"{name}.aimodel", chunk=CHUNK, checkpoint=checkpoint)
    outcome = run_isolated(runtime_greedy, str(asset), PROMPT, NEW_TOKENS, timeout=300)
    if not outcome.ok:
        return {**row, "outcome": outcome.summary()}
    got = outcome.result
    same = sum(a == b for a, b in zip(got["tokens"], want_tokens, strict=True))
    error = logits_error(got, want_tokens, want_rows)
    return {
        **row,
        "outcome": "decodes like transformers" if same == NEW_TOKENS else "wrong tokens",
        "greedy tokens on the runtime": f"{same}/{NEW_TOKENS} identical",
        "logits max abs error (runtime)": float(f"{error:.2g}"),
        "stop ids": ", ".join(str(t) for t in ours.config.stop_token_ids),
    }
