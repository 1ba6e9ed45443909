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


def qwen_size(height: int, width: int, settings: dict) -> tuple[int, int]:
    """Qwen's `smart_resize`: sides rounded to a multiple of `patch_size * merge_size`, the
    pixels within the processor's `size` (shortest_edge .. longest_edge, in pixels)."""
    factor = settings["patch_size"] * settings["merge_size"]
    least, most = settings["size"]["shortest_edge"], settings["size"]["longest_edge"]
    if max(height, width) / min(height, width) > 200:
        raise MediaError(f"a {width}x{height} image is more than 200 times as long as wide")
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > most:
        beta = math.sqrt(height * width / most)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < least:
        beta = math.sqrt(least / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


def qwen_patches(image, settings: dict) -> dict[str, np.ndarray | int]:
    """`pixel_values` `[P, C T p p]` (normalized, each patch repeated over time, 2 x 2
    blocks consecutive), the position table's resampling (`taps`, `tap_weights` `[P, 4]`),
    each patch's `rows_columns` `[P, 2]` (-1 for padding), the `grid` (t, h, w) and
    `soft_tokens`, as `Qwen2VLImageProcessorPil` and transformers' vision helpers compute
    them."""
    from PIL import Image

    patch, merge, frames = (
        settings["patch_size"],
        settings["merge_size"],
        settings["temporal_patch_size"],
    )
    height, width = qwen_size(image.height, image.width, settings)
    if (height, width) != (image.height, image.width):
        resample = getattr(Image.Resampling, RESAMPLE[settings.get("resample", 3)])
        image = image.resize((width, height), resample=resample)
    pixels = np.asarray(image, dtype=np.uint8).transpose(2, 0, 1).astype(np.float64)
    pixels = (pixels * settings.get("rescale_factor", 1 / 255)).astype(np.float32)
    if settings.get("do_normalize", True):
        mean = np.array(settings["image_mean"], np.float32)[:, None, None]
        std = np.array(settings["image_std"], np.float32)[:, None, None]
        pixels = (pixels - mean) / std
    rows, columns = height // patch, width // patch
    blocks = pixels.reshape(3, rows // merge, merge, patch, columns // merge, merge, patch)
    blocks = blocks.transpose(1, 4, 2, 5, 0, 3, 6)  # block row, block column, in row, in col
    blocks = np.broadcast_to(blocks[:, :, :, :, :, None], (*blocks.shape[:5], frames, patch, patch))
    flat = blocks.reshape(rows * columns, -1)
    budget = settings["size"]["longest_edge"] // (patch * merge) ** 2 * merge * merge
    n = rows * columns
    where = np.arange(n)  # each patch's (row, column), in the blocks' order
    in_column, in_row = where % merge, (where // merge) % merge
    block_column = (where // (merge * merge)) % (columns // merge)
    block_row = where // (merge * merge * (columns // merge))
    row, column = block_row * merge + in_row, block_column * merge + in_column
    side = int(settings["position_table"] ** 0.5)
    row_taps, row_weights = _bilinear_taps(row, rows, side)
    column_taps, column_weights = _bilinear_taps(column, columns, side)
    taps = (row_taps[:, :, None] * side + column_taps[:, None, :]).reshape(n, 4)
    tap_weights = (row_weights[:, :, None] * column_weights[:, None, :]).reshape(n, 4)
    out = {
        "pixel_values": np.zeros((budget, flat.shape[1]), np.float32),
        "taps": np.zeros((budget, 4), np.int32),
        "tap_weights": np.zeros((budget, 4), np.float32),
        "rows_columns": np.full((budget, 2), -1, np.int32),
    }
    out["pixel_values"][:n], out["taps"][:n], out["tap_weights"][:n] = flat, taps, tap_weights
    out["rows_columns"][:n] = np.stack([row, column], axis=-1)
    return out | {"grid": (1, rows, columns), "soft_tokens": n // (merge * merge)}


def _bilinear_taps(index: np.ndarray, size: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """The two taps into a `side`-long table and their weights for positions `index` of an
    axis `size` long (bilinear, corners aligned), in float32 as transformers computes them."""
    source = index.astype(np.float32) * np.float32(side - 1) / np.float32(max(size - 1, 1))
    floor = np.floor(source)
    offsets = np.arange(2)
    taps = np.clip(floor.astype(np.int64)[:, None] + offsets, 0, side - 1)
    distance = np.abs(source[:, None] - floor[:, None] - offsets).astype(np.float32)
    return taps, np.clip(1 - distance, 0, None).astype(np.float32)


# an asset's `processor.kind` -> how its images are prepared
IMAGE_PROCESSORS = {"gemma4": gemma4_patches, "qwen3_5": qwen_patches}


def prepare_image(image, processor: dict) -> dict[str, np.ndarray | int]:
    """An image (a path or a PIL image) as the vision function's inputs and its soft-token
    count, by the asset's `processor` (metadata.json's `components.vision.processor`)."""
    if isinstance(image, (str, Path)):
        image = read_image(image)
    settings = processor["settings"] | {
        k: processor[k] for k in ("position_table",) if k in processor
    }
    return IMAGE_PROCESSORS[processor["kind"]](image, settings)


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


def encode_images(vision, images, processor: dict) -> list[tuple[np.ndarray, tuple]]:
    """Each image's soft tokens `[n, width]` from an asset's `vision` function, and its
    grid (t, h, w in patches; Gemma 4's: none)."""
    out = []
    for image in images:
        prepared = prepare_image(image, processor)
        inputs = {name: prepared[name] for name in vision.input_names}
        soft = vision(inputs)["soft_tokens"][0, : prepared["soft_tokens"]]
        out.append((soft, prepared.get("grid")))
    return out


def place_images(generator, ids: list[int], images) -> None:
    """Before `Generator.feed(ids, images)`: each image's soft tokens at the ids' image
    tokens, in order, and with multimodal RoPE (Qwen3.5) each token's three positions:
    transformers' `get_rope_index` from where the context stands."""
    processor = vision_processor(generator.asset.components, generator.asset.path)
    encoded = encode_images(generator.functions["vision"][0], images, processor)
    rows = soft_token_rows(ids, [soft for soft, _ in encoded], processor)
    start = generator.position
    generator.soft.update({start + i: row for i, row in rows.items()})
    if not generator.spec.mrope_section:
        return
    merge = processor["settings"]["merge_size"]
    grids = iter(grid for _, grid in encoded)
    current = start + generator.rope_shift  # the next text token's position
    i = 0
    while i < len(ids):
        if i not in rows:
            generator.rope[start + i] = (current,) * 3
            current, i = current + 1, i + 1
            continue
        _, height, width = next(grids)
        height, width = height // merge, width // merge
        for k in range(height * width):
            generator.rope[start + i + k] = (current, current + k // width, current + k % width)
        current, i = current + max(height, width), i + height * width
    generator.rope_shift = current - (start + len(ids))


def soft_inputs(generator, position: int, length: int) -> dict[str, np.ndarray]:
    """A call's `soft_tokens` `[1, length, width]` and `soft_mask` `[1, length, 1]` from
    `position` (the soft token of each position the generator holds one for, zeros
    elsewhere), and with multimodal RoPE its `mrope_positions` `[3, length]`."""
    rows = np.zeros((1, length, generator.spec.soft_tokens), np.float32)
    mask = np.zeros((1, length, 1), np.float32)
    for i in range(length):
        if position + i in generator.soft:
            rows[0, i], mask[0, i] = generator.soft[position + i], 1.0
    out = {"soft_tokens": rows, "soft_mask": mask}
    if generator.spec.mrope_section:
        shift = generator.rope_shift
        axes = [generator.rope.get(p, (p + shift,) * 3) for p in range(position, position + length)]
        out["mrope_positions"] = np.array(axes, np.int32).T.copy()
    return out


def feed_around_images(generator, ids: list[int]) -> np.ndarray:
    """`Generator.feed` of `ids` where each image's tokens attend to each other both ways
    (`DecodeSpec.media_chunk`): the text around them as usual, each image's run of tokens
    in one `prefill_media` call, padded to its length, whose sliding mask opens the run to
    itself within the window (transformers' overlay: AND(window, OR(causal, same image))). The
    padding writes cache columns past the run that the text after it writes again."""
    start, logits = 0, None
    runs = image_runs(ids, generator.position, generator.soft)
    if runs and runs[-1][1] == len(ids):  # the processor always closes an image
        raise MediaError("the prompt ends inside an image's tokens: close it (end of image)")
    for first, stop in runs:
        if first > start:
            logits = generator._feed_text(ids[start:first])
        logits = _image_run(generator, ids[first:stop])
        start = stop
    if start < len(ids):
        logits = generator._feed_text(ids[start:])
    return logits


def image_runs(ids: list[int], position: int, soft: dict) -> list[tuple[int, int]]:
    """[first, stop) of each run of consecutive image tokens in `ids` (fed at `position`)."""
    runs: list[tuple[int, int]] = []
    for i in range(len(ids)):
        if position + i in soft:
            if runs and runs[-1][1] == i:
                runs[-1] = (runs[-1][0], i + 1)
            else:
                runs.append((i, i + 1))
    return runs


def _image_run(generator, piece: list[int]) -> np.ndarray:
    spec, position = generator.spec, generator.position
    if len(piece) > spec.media_chunk:
        raise MediaError(
            f"an image of {len(piece)} tokens is longer than the asset's image call "
            f"({spec.media_chunk}): prepare it with the asset's own processor"
        )
    (function,) = generator.functions["prefill_media"]
    generator.ran.append(function.name)
    pad = generator.asset.components["vision"]["processor"]["pad_token_id"]
    padded = piece + [pad] * (spec.media_chunk - len(piece))
    inputs = generator._inputs(function, padded, position)
    if "sliding_mask" in inputs:  # the run sees all of itself within the window
        rows = position + np.arange(len(piece))[:, None]
        columns = position + np.arange(len(piece))[None, :]
        within = columns > rows - spec.sliding_window
        block = inputs["sliding_mask"][0, 0, : len(piece), position : position + len(piece)]
        block[within] = 0.0
    states = {name: generator.states[name] for name in function.state_names}
    logits = function(inputs, states)["logits"]
    generator.position += len(piece)
    return logits
