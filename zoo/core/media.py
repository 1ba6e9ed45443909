"""Images on the host, without torch: a file read, prepared as the checkpoint's own image
processor prepares it, and its placeholder tokens put in the prompt where the processor puts
them.

An asset with a vision component carries what its processor needs (metadata.json's
`components.vision.processor`: the settings of the checkpoint's preprocessor_config.json,
the processor's kind, the image tokens), so it answers with the checkpoint folder gone.
Each kind below is the PIL path of transformers 5.23's processor re-written with numpy
(`Gemma4ImageProcessorPil`); the tests hold each to the original on random images.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

# transformers' PILImageResampling numbers -> PIL's own
RESAMPLE = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}


class MediaError(ValueError):
    """An image that cannot be read or prepared; the message says which and why."""


def read_image(path: str | Path):
    """An image file as an RGB PIL image, or a `MediaError` naming the file."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise MediaError(f"--image {path}: {what}; pass an image file (PNG, JPEG, ...)")
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as error:
        raise MediaError(f"--image {path}: not an image PIL can read ({error})") from None


def gemma4_size(height: int, width: int, settings: dict) -> tuple[int, int]:
    """Gemma 4's resize: the largest size that keeps the aspect ratio, holds at most
    `max_soft_tokens * k^2` patches and whose sides are multiples of `k * patch_size`."""
    patch, k = settings["patch_size"], settings["pooling_kernel_size"]
    max_patches = settings["max_soft_tokens"] * k * k
    factor = math.sqrt(max_patches * patch * patch / (height * width))
    side = k * patch
    target_height = int(math.floor(factor * height / side)) * side
    target_width = int(math.floor(factor * width / side)) * side
    if target_height == 0 and target_width == 0:
        raise MediaError(f"a {width}x{height} image is too thin to cut into {side}-pixel blocks")
    longest = (max_patches // (k * k)) * side
    if target_height == 0:
        target_height, target_width = side, min(width // height * side, longest)
    elif target_width == 0:
        target_width, target_height = side, min(height // width * side, longest)
    return target_height, target_width


def gemma4_patches(image, settings: dict) -> dict[str, np.ndarray | int]:
    """`pixel_values` `[1, P, 3 p^2]` (float32, rescaled), `pixel_position_ids` `[1, P, 2]`
    (x, y; -1 for padding) and `soft_tokens` (how many the image becomes), as
    `Gemma4ImageProcessorPil` computes them."""
    from PIL import Image

    patch, k = settings["patch_size"], settings["pooling_kernel_size"]
    max_patches = settings["max_soft_tokens"] * k * k
    height, width = gemma4_size(image.height, image.width, settings)
    if (height, width) != (image.height, image.width):
        resample = getattr(Image.Resampling, RESAMPLE[settings.get("resample", 3)])
        image = image.resize((width, height), resample=resample)
    pixels = np.asarray(image, dtype=np.uint8).transpose(2, 0, 1)  # channels first
    if settings.get("do_rescale", True):
        scale = settings.get("rescale_factor", 1 / 255)  # in float64, as transformers does
        pixels = (pixels.astype(np.float64) * scale).astype(np.float32)
    rows, columns = height // patch, width // patch
    patches = pixels.reshape(3, rows, patch, columns, patch).transpose(1, 3, 2, 4, 0)
    patches = patches.reshape(rows * columns, -1)
    x, y = np.meshgrid(np.arange(columns), np.arange(rows), indexing="xy")
    positions = np.stack([x, y], axis=-1).reshape(-1, 2)
    padded = np.zeros((max_patches, patches.shape[1]), np.float32)
    padded[: len(patches)] = patches
    where = np.full((max_patches, 2), -1, np.int32)
    where[: len(positions)] = positions
    return {
        "pixel_values": padded[None],
        "pixel_position_ids": where[None],
        "soft_tokens": len(patches) // (k * k),
    }


# an asset's `processor.kind` -> how its images are prepared
IMAGE_PROCESSORS = {"gemma4": gemma4_patches}


def prepare_image(image, processor: dict) -> dict[str, np.ndarray | int]:
    """An image (a path or a PIL image) as the vision function's inputs and its soft-token
    count, by the asset's `processor` (metadata.json's `components.vision.processor`)."""
    if isinstance(image, (str, Path)):
        image = read_image(image)
    return IMAGE_PROCESSORS[processor["kind"]](image, processor["settings"])


def expand_image_tokens(text: str, counts: list[int], processor: dict) -> str:
    """The rendered prompt with each image placeholder replaced as the processor replaces
    it: begin-of-image, `count` image tokens, end-of-image."""
    token = processor["image_token"]
    found = text.count(token)
    if found != len(counts):
        raise MediaError(
            f"the prompt holds {found} image placeholder(s) {token!r} for {len(counts)} image(s)"
        )
    pieces = text.split(token)
    out = [pieces[0]]
    for count, rest in zip(counts, pieces[1:], strict=True):
        out.append(processor["begin"] + token * count + processor["end"] + rest)
    return "".join(out)


def vision_processor(components: dict, path) -> dict:
    """An asset's image processor (`components.vision.processor`), or a refusal naming the
    asset: a model without a vision component takes no images."""
    vision = components.get("vision")
    if not vision:
        raise MediaError(
            f"{path} has no vision component: it takes no images (export a checkpoint with a "
            "vision encoder, without --text-only)"
        )
    return vision["processor"]


def soft_token_rows(prompt_ids, features: list[np.ndarray], processor: dict) -> dict:
    """Position in the prompt -> the soft token that replaces it: the images' soft tokens,
    in order, at the prompt's image tokens (where the processor put them)."""
    where = [i for i, token in enumerate(prompt_ids) if token == processor["image_token_id"]]
    rows = [row for image in features for row in image]
    if len(where) != len(rows):
        raise MediaError(
            f"the prompt holds {len(where)} image tokens and the images make {len(rows)} soft "
            "tokens: build the prompt with zoo.core.media.expand_image_tokens"
        )
    return dict(zip(where, rows, strict=True))


def image_prompt(
    tokenizer, directory: Path, text: str, images: list, processor: dict, system: str | None = None
) -> list[int]:
    """Prompt ids of `images` then `text` in one user turn through the chat template of
    `directory` (an asset carries its checkpoint's), each image placeholder expanded as
    the processor expands it: what `processor.apply_chat_template(messages,
    add_generation_prompt=True, tokenize=True)` gives with the images."""
    from zoo.core.text import chat_prompt

    counts = [prepare_image(image, processor)["soft_tokens"] for image in images]
    rendered = chat_prompt(directory, text, system, images=len(images))
    expanded = expand_image_tokens(rendered, counts, processor)
    return tokenizer.encode(expanded, add_special_tokens=False).ids


def encode_images(vision, images, processor: dict) -> list[np.ndarray]:
    """Each image's soft tokens `[n, width]` from an asset's `vision` function."""
    out = []
    for image in images:
        prepared = prepare_image(image, processor)
        inputs = {name: prepared[name] for name in vision.input_names}
        out.append(vision(inputs)["soft_tokens"][0, : prepared["soft_tokens"]])
    return out


def soft_inputs(soft: dict, position: int, length: int, width: int) -> dict[str, np.ndarray]:
    """A call's `soft_tokens` `[1, length, width]` and `soft_mask` `[1, length, 1]` from
    `position`: the soft token of each position `soft` holds (an image's), zeros
    elsewhere."""
    rows = np.zeros((1, length, width), np.float32)
    mask = np.zeros((1, length, 1), np.float32)
    for i in range(length):
        if position + i in soft:
            rows[0, i], mask[0, i] = soft[position + i], 1.0
    return {"soft_tokens": rows, "soft_mask": mask}
