"""Images prepared on the host, without torch, as the checkpoint's own image processor
prepares them: the PIL paths of transformers 5.23's `Gemma4ImageProcessorPil` and
`Qwen2VLImageProcessorPil` (with its vision helpers' position taps) re-written with numpy;
the tests hold each to the original on random images of many sizes. What happens to the
result (the encoder, the prompt) is `zoo.core.host.media`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from zoo.core.io.files import MediaError

# transformers' PILImageResampling numbers -> PIL's own
RESAMPLE = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}


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
    except Image.DecompressionBombError:  # PIL's guard: pixels past what it decodes
        raise MediaError(
            f"--image {path}: more than {2 * Image.MAX_IMAGE_PIXELS:,} pixels, more than PIL "
            "decodes (a guard against decompression bombs): resize it first"
        ) from None
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
