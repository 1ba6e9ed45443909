"""An asset's components beyond the text decoder: today a vision encoder (Gemma 4).

A multimodal checkpoint exports, by default, its text decoder and its vision encoder into one
asset: the encoder a function of its own (`vision`: image patches in, soft tokens out), the
decoder's functions taking those soft tokens in place of some tokens' embeddings
(`DecodeSpec.soft_tokens`). metadata.json's `components.vision` says which function it is
and carries what the host needs to prepare an image (`zoo.core.media`): the checkpoint's
image processor settings and its image tokens. `--text-only` keeps the decoder alone.

An entry that reads images names a vision module (`ModelEntry.vision`) with three members:
`has_vision(directory)`, `load_vision(directory, text_width)` (the encoder, weights read)
and `processor(directory)` (what the host needs, as stored in metadata.json).
"""

from __future__ import annotations

from pathlib import Path

VISION_FUNCTION = "vision"


def plan_components(entry, checkpoint: Path, text_only: bool) -> tuple[tuple[str, ...], str]:
    """The components an export of `checkpoint` writes, and why the others are left out
    (`""` when nothing is): the vision encoder when the checkpoint has one, the entry
    reads it, the checkpoint ships its image processor's settings and not `text_only`."""
    vision = getattr(entry, "vision", None)
    if vision is None or not vision.has_vision(checkpoint):
        return ("decoder",), ""
    if text_only:
        return ("decoder",), "the vision encoder left out (--text-only)"
    processor = vision.processor(checkpoint)
    if not processor.get("settings"):
        return ("decoder",), (
            "the vision encoder left out: the checkpoint has no preprocessor_config.json "
            "(its image processor's settings)"
        )
    if not processor.get("image_token"):
        return ("decoder",), "the vision encoder left out: no tokenizer.json for its image tokens"
    return ("decoder", "vision"), ""


def check_components(plan) -> None:
    """What a vision component cannot be exported with (yet), refused by name."""
    if "vision" not in plan.components:
        return
    blocked = [
        (plan.ranges or plan.streamed, "layer ranges (--layers-per-function, --stream)"),
        (plan.first_layers, "--first-layers"),
        (plan.target != "zoo", "--target apple-engine"),
    ]
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
