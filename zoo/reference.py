"""transformers as the reference the zoo's models are held to (tests and recipes only):
tiny random checkpoints of an entry, transformers' model of a checkpoint, its greedy tokens.

Above `zoo.core` (which never imports it): an entry names its tiny configs as data
(`ModelEntry.tiny`); writing them needs transformers, which only tests and recipes have."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path


def make_tiny_checkpoint(
    entry,
    directory: str | Path,
    variant: str | None = None,
    seed: int = 0,
    multimodal: bool = False,
    images: bool = False,
    audio: bool = False,
    **text,
) -> Path:
    """A random-weight checkpoint of `entry` (a `ModelEntry` or its name) written by
    transformers' `save_pretrained` (config.json, model.safetensors, tokenizer.json): the
    code that loads it loads a released one. `text` overrides fields of the tiny text
    config (e.g. `num_hidden_layers=8`). `images` (an entry that reads them): the multimodal
    layout with the image processor's settings, image tokens and a chat template; `audio`
    (Gemma 4): an audio tower too, with the feature extractor's settings and audio tokens."""
    entry = _entry(entry)
    variant = variant or next(iter(entry.tiny.variants))
    if variant not in entry.tiny.variants:
        raise ValueError(f"no tiny {entry.title} variant {variant!r}: {list(entry.tiny.variants)}")
    config = {**entry.tiny.text, **entry.tiny.variants[variant], **text}
    if audio and not entry.tiny.audio:
        raise ValueError(f"the {entry.title} entry hears no audio")
    towers = (
        {"audio_config": entry.tiny.audio["config"], **entry.tiny.audio["tokens"]} if audio else {}
    )
    directory = write_tiny_checkpoint(
        entry, Path(directory), config, seed, multimodal or images or audio, towers
    )
    if images:
        write_image_files(entry, directory)
    if audio:
        write_audio_files(entry, directory)
    if images or audio:
        vocab = json.loads((directory / "config.json").read_text())["text_config"]["vocab_size"]
        specials = entry.tiny.images.get("specials", {}) | entry.tiny.audio.get("specials", {})
        write_tokenizer(directory, vocab, specials)
        template = entry.tiny.images.get("chat_template") or entry.tiny.audio["chat_template"]
        (directory / "chat_template.jinja").write_text(template)
    return directory


def write_audio_files(entry, directory: Path) -> None:
    """What a checkpoint that hears audio ships beside its weights: processor_config.json
    with the feature extractor's settings (written by transformers' own extractor) and the
    token budget, as transformers 5 saves a processor."""
    import transformers

    name = entry.transformers_name
    extractor = getattr(transformers, f"{name}AudioFeatureExtractor")
    found = directory / "processor_config.json"
    outer = json.loads(found.read_text()) if found.is_file() else {}
    made = extractor(**entry.tiny.audio["feature_extractor"])
    outer["feature_extractor"] = json.loads(made.to_json_string())  # as save_pretrained writes
    outer["audio_seq_length"] = entry.tiny.audio["audio_seq_length"]
    found.write_text(json.dumps(outer, indent=2))


def write_image_files(entry, directory: Path) -> None:
    """What a checkpoint that reads images ships beside its weights: the image processor's
    settings (written by transformers' own processor)."""
    import importlib

    media = entry.tiny.images
    if not media:
        raise ValueError(f"the {entry.title} entry reads no images")
    name = entry.transformers_name
    where = media.get("processor_class") or (
        f"transformers.models.{name.lower()}.image_processing_pil_{name.lower()}."
        f"{name}ImageProcessorPil"
    )
    module, _, cls = where.rpartition(".")
    getattr(importlib.import_module(module), cls)(**media["processor"]).save_pretrained(directory)


def reference_model(entry, directory: str | Path):
    """transformers' model of a checkpoint directory of `entry` (or its name)."""
    entry = _entry(entry)
    return load_reference(directory, entry.config.MULTIMODAL_TYPE, entry.multimodal_class)


def _entry(entry):
    from zoo.core.model.entry import get_entry

    return get_entry(entry) if isinstance(entry, str) else entry


def load_reference(
    directory: str | Path, multimodal_type: str | None, multimodal_class: str | None
):
    """The transformers model of a checkpoint directory (text-only or multimodal layout)."""
    import transformers

    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bars
    config = json.loads((Path(directory) / "config.json").read_text())
    if multimodal_type is not None and config.get("model_type") == multimodal_type:
        cls = getattr(transformers, multimodal_class)
    else:
        cls = transformers.AutoModelForCausalLM
    return cls.from_pretrained(directory, attn_implementation="eager").eval()


def greedy_reference(model, prompt: list[int], max_new_tokens: int = 8, **media) -> list[int]:
    """transformers' greedy `generate`, without stopping at an end-of-sequence token
    (`media`: what the processor gave beside the ids, e.g. `pixel_values`).

    The attention mask is passed: without it transformers masks every prompt token equal to
    the pad id (SmolLM2's pad id is its `<|im_end|>`, which chat prompts contain)."""
    import torch

    ids = torch.tensor([prompt])
    output = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        **media,
    )
    return output[0, len(prompt) :].tolist()


def greedy_reference_logits(model, prompt: list[int], new_tokens: int = 8):
    """transformers' greedy tokens and the logits row each was chosen from (the model run
    once over prompt + tokens, fp32 numpy `[new_tokens, vocab]`)."""
    import torch

    tokens = greedy_reference(model, prompt, new_tokens)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float().numpy()
    return tokens, logits[len(prompt) - 1 : len(prompt) - 1 + new_tokens]


def write_tokenizer(
    directory: Path, vocab_size: int, specials: dict[int, str] | None = None
) -> None:
    """A word-level tokenizer over `w0 ... wN`: enough to test text in, text out.

    `specials` (id -> token, e.g. {106: "<end_of_turn>"}) puts a model's special tokens at
    their ids, for chat templates."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    specials = specials or {}
    vocab = {specials.get(i, f"w{i}"): i for i in range(vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in specials.values()])
    tokenizer.save(str(directory / "tokenizer.json"))


def write_tiny_checkpoint(
    entry, directory: Path, text: dict, seed: int, multimodal: bool, towers: dict | None = None
) -> Path:
    """Build `entry`'s transformers model from the text config `text` (and the other
    `towers` beside the entry's own) with random weights (seeded) and `save_pretrained` it,
    with a word-level tokenizer beside it."""
    import torch
    import transformers

    torch.manual_seed(seed)
    text_config = getattr(transformers, entry.text_config_class)
    if multimodal:
        config_class = getattr(transformers, f"{entry.transformers_name}Config")
        config = config_class(text_config=text, **(entry.tiny.towers | (towers or {})))
        model = getattr(transformers, entry.multimodal_class)(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(
            text_config(**text), attn_implementation="eager"
        )
    if entry.tiny.jitter:  # constants at init: jittered so the parity tests see them matter
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if any(part in name for part in entry.tiny.jitter):
                    parameter.add_(0.1 * torch.randn_like(parameter))
    transformers.utils.logging.disable_progress_bar()  # no "Writing model shards" bars
    model.eval().save_pretrained(directory)
    write_tokenizer(directory, text["vocab_size"])
    return directory


def parity_row(
    model: str,
    checkpoint: str | Path,
    strategy: str,
    prompt: list[int],
    label: str,
    asset: str | Path,
    capacity: int = 64,
    chunk: int = 4,
) -> dict:
    """One row of a parity table: our decoder (zoo model `model`, loaded from `checkpoint`
    with a KV `strategy`) against transformers on the same weights: the max abs error of
    the torch logits over `prompt`, and 8 greedy tokens on the Core AI runtime (the asset
    exported to `asset`) against transformers' `generate`."""
    import torch

    from zoo.core.export.functions import export_model
    from zoo.core.host.generator import Generator
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry

    entry = get_entry(model)
    reference = reference_model(entry, checkpoint)
    ours = entry.load(checkpoint, strategy, capacity)
    with torch.no_grad():
        want_logits = reference(torch.tensor([prompt])).logits
    error = (torch_logits(ours, prompt) - want_logits).abs().max().item()
    path = export_model(ours, asset, chunk=chunk, overwrite=True)
    with Generator(path) as generator:
        got = generator.generate(prompt, 8, stop_token_ids=[])
    want = greedy_reference(reference, prompt)
    same = sum(a == b for a, b in zip(got, want, strict=True))
    return {
        "config": label,
        "KV strategy": strategy,
        "logits max abs error (torch)": float(f"{error:.2g}"),
        "greedy tokens on the runtime": f"{same}/8 identical",
    }


def same_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two greedy continuations share before they first differ."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def text_beside_transformers(
    asset: str | Path, checkpoint: str | Path, prompt: str, chat: bool, new_tokens: int = 32
) -> dict:
    """The runtime's greedy continuation of `prompt` (through the chat template with
    `chat`) beside transformers' on the same checkpoint: both as text, cut after the
    first stop token, and how many of the `new_tokens` greedy tokens agree before the first
    difference. The runtime runs in a process of its own (`zoo.core.isolate`); in a test
    session the row is computed once for the tests and the recipes that ask for it."""
    from zoo.core.isolate import cached_call, run_isolated

    sources = sorted(Path(__file__).resolve().parents[1].rglob("*.py"))
    key = ["text beside transformers", *sources, Path(asset) / "metadata.json", str(asset)]
    outcome = cached_call(
        lambda: run_isolated(
            _text_beside_transformers,
            *(str(asset), str(checkpoint), prompt, chat, new_tokens),
            timeout=1800,
        ),
        [*key, str(checkpoint), prompt, chat, new_tokens],
    )
    if not outcome.ok:
        raise RuntimeError(f"text beside transformers: {outcome.summary()}\n{outcome.detail}")
    return outcome.result


def _text_beside_transformers(
    asset: str, checkpoint: str, prompt: str, chat: bool, new_tokens: int
) -> dict:
    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.asset.tokenizer import encode_prompt, load_tokenizer
    from zoo.core.host.generator import greedy_on_runtime
    from zoo.core.isolate import run_isolated

    checkpoint = Path(checkpoint)
    spec = DecodeSpec.of_asset(asset)
    tokenizer = load_tokenizer(checkpoint / "tokenizer.json")
    ids = encode_prompt(tokenizer, checkpoint, prompt, chat)
    outcome = run_isolated(greedy_on_runtime, str(asset), ids, new_tokens, timeout=900)
    if not outcome.ok:
        raise RuntimeError(f"the runtime did not decode: {outcome.summary()}")
    want = greedy_reference(reference_model(spec.model, checkpoint), ids, new_tokens)

    def text(tokens: list[int]) -> str:
        stop = next((i for i, t in enumerate(tokens) if t in spec.stop_token_ids), None)
        return tokenizer.decode(tokens if stop is None else tokens[: stop + 1]).strip()

    agree = same_prefix(outcome.result, want)
    return {
        "prompt": prompt,
        "Core AI runtime": text(outcome.result),
        "transformers": text(want),
        f"first {new_tokens} tokens agree": f"{agree}/{new_tokens}",
        "tokens": {"runtime": outcome.result, "transformers": want},
    }


def store_experts_mxfp4(directory: Path) -> None:
    """Rewrite a checkpoint's stacked expert weights (`*.mlp.experts.gate_up_proj`,
    `down_proj`) as MXFP4 blocks and scales and say so in config.json, as GPT-OSS is
    released (`zoo.core.checkpoint.mxfp4.quantize`; biases stay as they are)."""
    from safetensors.torch import load_file, save_file

    from zoo.core.checkpoint.mxfp4 import BLOCKS, SCALES, quantize

    for path in sorted(directory.glob("*.safetensors")):
        tensors = load_file(path)
        stacked = ("experts.gate_up_proj", "experts.down_proj")
        for key in [k for k in tensors if k.endswith(stacked)]:
            blocks, scales = quantize(tensors.pop(key))
            tensors[key + BLOCKS], tensors[key + SCALES] = blocks, scales
        save_file(tensors, path, metadata={"format": "pt"})
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4"}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    index = directory / "model.safetensors.index.json"
    if index.exists():
        raise NotImplementedError("a sharded checkpoint: rewrite its index too")


def as_hub_download(
    folder: str | Path, hf_home: str | Path, repo_id: str, revision: str = "0" * 40
) -> Path:
    """`folder`'s files laid out as `hf download repo_id` leaves them under `hf_home`: each
    file a blob named by its sha256 in the repository's `blobs/`, the snapshot's files
    relative links to them, `refs/main` naming the revision. Returns the snapshot."""
    import hashlib
    import os

    repo = Path(hf_home) / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for file in sorted(Path(folder).iterdir()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def eager_decode_ms(entry: str, checkpoint: str | Path, ids: list[int], steps: int) -> float:
    """Median ms of a decode step of transformers' model (fp32, torch eager, KV cache)."""
    import torch

    model = reference_model(_entry(entry), checkpoint)
    times = []
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        for _ in range(steps):
            token = out.logits[:, -1:].argmax(-1)
            started = time.perf_counter()
            out = model(token, past_key_values=out.past_key_values, use_cache=True)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def logits_error(got: dict, want_tokens: list[int], want_rows) -> float:
    """Largest |runtime - transformers| over the logits of the greedy steps (NaN unless the
    tokens agree: then the rows score different sequences)."""
    import math

    import numpy as np

    if got["tokens"] != want_tokens:
        return math.nan
    return float(np.abs(np.array(got["logits"]) - want_rows).max())
