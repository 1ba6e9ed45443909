"""An asset's components beyond the text decoder: encoders of images (Gemma 4, Qwen3.5) and
of audio (Gemma 4 E2B/E4B).

A multimodal checkpoint exports, by default, its text decoder and its encoders into one
asset: each encoder a function of its own named for its component (`vision`: image patches
in; `audio`: log-mel frames in; soft tokens out), the decoder's functions taking those soft
tokens in place of some tokens' embeddings (`DecodeSpec.soft_tokens`). metadata.json's
`components.NAME` says which function it is and carries what the host needs to prepare an
input (`processor`: the checkpoint's processor settings, the token budget, the placeholder
tokens; `zoo.core.host.media`). `--text-only` keeps the decoder alone.

Each kind of encoder is one `EncoderKind` below. An entry names, per component, the module
that reads its encoder (`ModelEntry.encoders`), with six members: `has_encoder(directory)`,
`load_encoder(directory, text_width, processor)` (the encoder, weights read),
`processor(directory)` (what the host needs, as stored in metadata.json),
`checkpoint_name(key)` (our name of a checkpoint tensor of the encoder, None for others),
`tokens(processor)` (the most soft tokens one input becomes: the function's fixed size) and
`with_tokens(processor, n)` (that budget changed). A model whose image tokens attend to each
other both ways says so in its processor (`bidirectional`): its decoder gets a
`prefill_media` function (`DecodeSpec.media_chunk`).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from zoo.core.asset.encoders import ENCODERS, EncoderKind
from zoo.core.io.files import read_json
from zoo.core.io.shown import readable_bytes


def budget_text(kind: EncoderKind, tokens: int, processor: dict) -> str:
    """What one function of `tokens` soft tokens takes, as the plan says it."""
    if kind.component == "audio":
        from zoo.core.host.audio import seconds_per_token

        seconds = tokens * seconds_per_token(processor)
        return f"audio clips up to {seconds:g} s ({tokens} soft tokens)"
    return f"{kind.noun}s up to {tokens} soft tokens"


def plan_components(
    entry, checkpoint: Path, options: dict
) -> tuple[tuple[str, ...], str, int, dict]:
    """The components an export of `checkpoint` writes; what the plan says of them beyond
    the decoder (each encoder's size and budget, or why it is left out); the bytes they add
    to the asset; and each encoder's processor, its budget applied (resolved once, here).
    An encoder is in when the checkpoint has one, the entry reads it, the checkpoint ships
    its processor's settings and placeholder token, and not `--text-only`."""
    components, notes, extra, processors = ["decoder"], [], 0, {}
    for name, module in entry.encoders.items():
        kind = ENCODERS[name]
        if not module.has_encoder(checkpoint):
            continue
        if options["text_only"]:
            notes.append(f"the {name} encoder left out (--text-only)")
            continue
        processor = module.processor(checkpoint)
        if not processor.get("settings"):
            notes.append(f"the {name} encoder left out: the checkpoint has no {kind.settings}")
            continue
        if not processor.get("token"):
            notes.append(f"the {name} encoder left out: no tokenizer.json for its tokens")
            continue
        size = encoder_bytes(checkpoint, module.checkpoint_name)
        own, used = module.tokens(processor), options[kind.budget_option]
        if used is None and kind.default_tokens and own > kind.default_tokens:
            used = kind.default_tokens
        if used is not None:
            processor = module.with_tokens(processor, used)
        budget = budget_text(kind, module.tokens(processor), processor)
        if used is not None and used != own:
            budget += f" (its processor allows {own}: --{kind.budget_option.replace('_', '-')} N)"
        notes.append(f"the {name} encoder about {readable_bytes(size)}, float32; {budget}")
        components.append(name)
        processors[name] = processor
        extra += size
    return tuple(components), "; ".join(notes), extra, processors


def encoder_bytes(checkpoint: Path, name) -> int:
    """An encoder's bytes in the asset: its tensors (from the safetensors headers), stored
    float32 whatever the preset (encoders stay at full precision)."""
    from math import prod

    from zoo.core.checkpoint.weights import tensor_headers

    return 4 * sum(prod(shape) for _, key, shape in tensor_headers(checkpoint) if name(key))


def check_components(plan) -> None:
    """What an encoder component cannot be exported with (yet), refused by name."""
    from zoo.core.model.entry import get_entry

    encoders = [name for name in plan.components if name != "decoder"]
    if not encoders:
        return
    blocked = [
        (plan.ranges or plan.streamed, "layer ranges (--layers-per-function, --stream)"),
        (plan.first_layers, "--first-layers"),
        (plan.target != "zoo", "--target apple-engine"),
    ]
    for held, what in blocked:
        if held:
            raise ValueError(
                f"an asset with an encoder ({', '.join(encoders)}) cannot be exported with "
                f"{what} yet: add --text-only for the text decoder alone"
            )
    entry = get_entry(plan.entry)
    for name in encoders:
        processor = plan.processors[name]
        tokens = entry.encoders[name].tokens(processor)
        if processor.get("bidirectional") and plan.capacity < tokens + 2:
            raise ValueError(
                f"--capacity {plan.capacity} cannot hold one {ENCODERS[name].noun} of this "
                f"checkpoint ({tokens} soft tokens read in one call): export with a larger "
                "--capacity, or --text-only"
            )


def encoder_entry_point(plan, name: str, text_width: int):
    """The function of `plan`'s encoder component `name` (float32: encoders stay at full
    precision) and its component in metadata.json."""
    import torch

    from zoo.core.export.convert import EntryPoint
    from zoo.core.model.entry import get_entry

    processor = plan.processors[name]
    module = (
        get_entry(plan.entry).encoders[name].load_encoder(plan.checkpoint, text_width, processor)
    )
    with torch.no_grad():
        example = module.example_inputs()
    entry = EntryPoint(name, module, example, list(module.input_names), ["soft_tokens"])
    component = {"functions": [name], "states": [], "sidecars": [], "processor": processor}
    return entry, component


def image_processor_settings(directory: Path) -> dict:
    """The image processor's settings a checkpoint ships: preprocessor_config.json, or
    transformers 5's processor_config.json with them under `image_processor`."""
    flat, nested = directory / "preprocessor_config.json", directory / "processor_config.json"
    if flat.is_file():
        found = read_json(flat)
        if "FeatureExtractor" not in str(found.get("feature_extractor_type")):
            return found
    if nested.is_file():
        return read_json(nested).get("image_processor") or {}
    return {}


def vision_config_of(cls, raw: dict, **settled):
    """A vision encoder's config dataclass `cls` from config.json's `vision_config` (the
    fields `cls` knows), then the `settled` fields (the processor's settings, ...)."""
    known = {f.name for f in fields(cls)}
    vision = raw.get("vision_config") or {}
    return cls(**{k: v for k, v in vision.items() if k in known}, **settled)


def token_text(directory: Path, token_id: int | None) -> str | None:
    """The text of a token id in the checkpoint's tokenizer.json (None without one)."""
    path = directory / "tokenizer.json"
    if token_id is None or not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path)).id_to_token(token_id)
