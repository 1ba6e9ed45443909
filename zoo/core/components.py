"""An asset's components beyond the text decoder: today a vision encoder (Gemma 4).

A multimodal checkpoint exports, by default, its text decoder and its vision encoder into one
asset: the encoder a function of its own (`vision`: image patches in, soft tokens out), the
decoder's functions taking those soft tokens in place of some tokens' embeddings
(`DecodeSpec.soft_tokens`). metadata.json's `components.vision` says which function it is
and carries what the host needs to prepare an image (`zoo.core.media`): the checkpoint's
image processor settings and its image tokens. `--text-only` keeps the decoder alone.

An entry that reads images names a vision module (`ModelEntry.vision`) with three members:
`has_vision(directory)`, `load_vision(directory, text_width)` (the encoder, weights read),
`processor(directory)` (what the host needs, as stored in metadata.json) and
`checkpoint_name(key)` (our name of a checkpoint tensor of the encoder, None for others).
A model whose image tokens attend to each other both ways says so in its processor
(`bidirectional`): its decoder gets a `prefill_media` function (`DecodeSpec.media_chunk`).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from zoo.core.export import readable_bytes
from zoo.core.files import read_json

VISION_FUNCTION = "vision"


def plan_components(
    entry, checkpoint: Path, text_only: bool, image_tokens: int | None = None
) -> tuple[tuple[str, ...], str, int]:
    """The components an export of `checkpoint` writes, and what the plan says of them
    beyond the decoder: the vision encoder's size, or why it is left out. The encoder is in
    when the checkpoint has one, the entry reads it, the checkpoint ships its image
    processor's settings and its image tokens, and not `text_only`. Last, the bytes the
    other components add to the asset."""
    vision = getattr(entry, "vision", None)
    if vision is None or not vision.has_vision(checkpoint):
        return ("decoder",), "", 0
    if text_only:
        return ("decoder",), "the vision encoder left out (--text-only)", 0
    processor = vision.processor(checkpoint)
    if not processor.get("settings"):
        why = "the checkpoint has no preprocessor_config.json (its image processor's settings)"
        return ("decoder",), f"the vision encoder left out: {why}", 0
    if not processor.get("image_token"):
        return (
            ("decoder",),
            "the vision encoder left out: no tokenizer.json for its image tokens",
            0,
        )
    size = vision_bytes(checkpoint, vision.checkpoint_name)
    own, used = (
        vision.image_tokens(processor),
        vision.image_tokens(image_processor(vision, checkpoint, image_tokens, processor)),
    )
    budget = f"images up to {used} soft tokens" + (
        f" (its processor allows {own}: --image-tokens N)" if used != own else ""
    )
    note = f"the vision encoder about {readable_bytes(size)}, float32; {budget}"
    return ("decoder", "vision"), note, size


def vision_bytes(checkpoint: Path, name) -> int:
    """The vision encoder's bytes in the asset: its tensors (from the safetensors headers),
    stored float32 whatever the preset (encoders stay at full precision)."""
    from math import prod

    from zoo.core.weights import tensor_headers

    return 4 * sum(prod(shape) for _, key, shape in tensor_headers(checkpoint) if name(key))


def check_components(plan) -> None:
    """What a vision component cannot be exported with (yet), refused by name."""
    from zoo.core.entry import get_entry

    if "vision" not in plan.components:
        return
    blocked = [
        (plan.ranges or plan.streamed, "layer ranges (--layers-per-function, --stream)"),
        (plan.first_layers, "--first-layers"),
        (plan.target != "zoo", "--target apple-engine"),
    ]
    vision = get_entry(plan.entry).vision
    processor = image_processor(vision, plan.checkpoint, plan.image_tokens)
    tokens = vision.image_tokens(processor)
    if processor.get("bidirectional") and plan.capacity < tokens + 2:
        raise ValueError(
            f"--capacity {plan.capacity} cannot hold one image of this checkpoint ({tokens} "
            "soft tokens read in one call): export with a larger --capacity, or --text-only"
        )
    for held, what in blocked:
        if held:
            raise ValueError(
                f"an asset with a vision encoder cannot be exported with {what} yet: add "
                "--text-only for the text decoder alone"
            )


def vision_entry_point(plan, text_width: int):
    """The `vision` function of `plan`'s checkpoint (float32: encoders stay at full
    precision) and its component in metadata.json."""
    import torch

    from zoo.core.entry import get_entry
    from zoo.core.export import EntryPoint

    vision = get_entry(plan.entry).vision
    processor = image_processor(vision, plan.checkpoint, plan.image_tokens)
    module = vision.load_vision(plan.checkpoint, text_width, processor["settings"])
    with torch.no_grad():
        example = module.example_inputs()
    entry = EntryPoint(VISION_FUNCTION, module, example, list(module.input_names), ["soft_tokens"])
    component = {
        "functions": [VISION_FUNCTION],
        "states": [],
        "sidecars": [],
        "processor": processor,
    }
    return entry, component


# images larger than this many soft tokens are resized smaller unless --image-tokens says
# otherwise: the vision function has one fixed size, and attention over its patches grows
# with its square (Qwen3.5's processor allows 16,384 tokens: 65,536 patches)
DEFAULT_IMAGE_TOKENS = 1024


def image_processor(vision, checkpoint: Path, tokens: int | None, processor=None) -> dict:
    """The checkpoint's image processor with its budget: `tokens` soft tokens an image if
    given, else its own up to `DEFAULT_IMAGE_TOKENS`."""
    processor = processor or vision.processor(checkpoint)  # (read once by the plan)
    own = vision.image_tokens(processor)
    if tokens is None and own <= DEFAULT_IMAGE_TOKENS:
        return processor
    return vision.with_image_tokens(processor, tokens or DEFAULT_IMAGE_TOKENS)


def image_processor_settings(directory: Path) -> dict:
    """The image processor's settings a checkpoint ships: preprocessor_config.json, or
    transformers 5's processor_config.json with them under `image_processor`."""
    flat, nested = directory / "preprocessor_config.json", directory / "processor_config.json"
    if flat.is_file():
        return read_json(flat)
    if nested.is_file():
        return read_json(nested).get("image_processor") or {}
    return {}


def vision_config_of(cls, raw: dict, **settled):
    """A vision encoder's config dataclass `cls` from config.json's `vision_config` (the
    fields `cls` knows), then the `settled` fields (the processor's settings, ...)."""
    known = {f.name for f in fields(cls)}
    vision = raw.get("vision_config") or {}
    return cls(**{k: v for k, v in vision.items() if k in known}, **settled)


def token_text(directory: Path, token_id: int) -> str | None:
    """The text of a token id in the checkpoint's tokenizer.json (None without one)."""
    path = directory / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path)).id_to_token(token_id)
