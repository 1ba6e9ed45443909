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

from pathlib import Path

from zoo.core.export import readable_bytes

VISION_FUNCTION = "vision"


def plan_components(entry, checkpoint: Path, text_only: bool) -> tuple[tuple[str, ...], str, int]:
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
        return ("decoder",), (
            "the vision encoder left out: the checkpoint has no preprocessor_config.json "
            "(its image processor's settings)",
            0,
        )
    if not processor.get("image_token"):
        return (
            ("decoder",),
            "the vision encoder left out: no tokenizer.json for its image tokens",
            0,
        )
    size = vision_bytes(checkpoint, vision.checkpoint_name)
    return ("decoder", "vision"), f"the vision encoder about {readable_bytes(size)}, float32", size


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
    entry = get_entry(plan.entry)
    processor = entry.vision.processor(plan.checkpoint)
    tokens = processor["settings"].get("max_soft_tokens", 280)
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
    module = vision.load_vision(plan.checkpoint, text_width)
    with torch.no_grad():
        example = module.example_inputs()
    entry = EntryPoint(VISION_FUNCTION, module, example, list(module.input_names), ["soft_tokens"])
    component = {
        "functions": [VISION_FUNCTION],
        "states": [],
        "sidecars": [],
        "processor": vision.processor(plan.checkpoint),
    }
    return entry, component
