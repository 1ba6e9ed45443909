"""The kinds of encoder component an asset may hold beside its text decoder, and how the zoo
speaks of each: images (`vision`) and audio clips (`audio`). Read by the plan of an export
(`zoo.core.export.components`) and by the host that prepares an input (`zoo.core.host.media`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EncoderKind:
    """A kind of input an encoder component reads, and how the zoo speaks of it."""

    component: str  # the component, its function and the processor's key in metadata.json
    noun: str  # what one input is: "image", "audio clip"
    option: str  # `zoo generate`'s option that passes one
    budget_option: str  # the export option that sets the function's size, in soft tokens
    settings: str  # where a checkpoint keeps its processor's settings
    default_tokens: int | None = None  # a budget above this is lowered unless asked


ENCODERS = {
    kind.component: kind
    for kind in (
        # images larger than 1024 soft tokens are resized smaller unless --image-tokens says
        # otherwise: attention over the patches grows with its square (Qwen3.5's processor
        # allows 16,384 tokens: 65,536 patches)
        EncoderKind(
            "vision",
            "image",
            "--image",
            "image_tokens",
            "preprocessor_config.json (its image processor's settings)",
            1024,
        ),
        EncoderKind(
            "audio",
            "audio clip",
            "--audio",
            "audio_tokens",
            "processor_config.json (its feature extractor's settings)",
        ),
    )
}
