"""Images and audio on the host, without torch: a file read, prepared as the checkpoint's
own processor prepares it, its soft tokens computed by the asset's encoder, and its
placeholder tokens put in the prompt where the processor puts them.

An asset with an encoder component carries what its processor needs (metadata.json's
`components.NAME.processor`: the settings of the checkpoint's processor, the processor's
kind, the placeholder tokens), so it answers with the checkpoint folder gone. Each image
kind below is the PIL path of transformers 5.23's processor re-written with numpy
(`Gemma4ImageProcessorPil`, `Qwen2VLImageProcessorPil`), audio is `zoo.core.host.audio`; the
tests hold each to the original.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.core.io.files import MediaError


def _gemma4_image(image, processor: dict) -> dict:
    from zoo.core.host.images import gemma4_patches

    return gemma4_patches(_image(image), processor["settings"])


def _qwen_image(image, processor: dict) -> dict:
    from zoo.core.host.images import qwen_patches

    settings = processor["settings"] | {"position_table": processor["position_table"]}
    return qwen_patches(_image(image), settings)


def _audio(clip, processor: dict) -> dict:
    from zoo.core.host.audio import prepare_clip

    return prepare_clip(clip, processor)


def _image(image):
    from zoo.core.host.images import read_image

    return read_image(image) if isinstance(image, (str, Path)) else image


# an asset's `processor.kind` -> how one input (a path, or what its reader gives: a PIL
# image; audio samples and their rate) becomes its encoder's inputs and soft-token count
PREPARE = {
    "gemma4": _gemma4_image,
    "qwen3_5": _qwen_image,
    "gemma4_audio": _audio,
    "gemma4_unified_audio": _audio,
}


def prepare(item, processor: dict) -> dict[str, np.ndarray | int]:
    """One input as its encoder function's inputs and its soft-token count, by the asset's
    `processor` (metadata.json's `components.NAME.processor`)."""
    return PREPARE[processor["kind"]](item, processor)


def expand_placeholders(text: str, counts: list[int], processor: dict) -> str:
    """The rendered prompt with each placeholder of the processor's kind replaced as the
    processor replaces it: its begin token, `count` placeholder tokens, its end token."""
    token = processor["token"]
    found = text.count(token)
    if found != len(counts):
        raise MediaError(
            f"the prompt holds {found} placeholder(s) {token!r} for {len(counts)} input(s)"
        )
    pieces = text.split(token)
    out = [pieces[0]]
    for count, rest in zip(counts, pieces[1:], strict=True):
        out.append(processor["begin"] + token * count + processor["end"] + rest)
    return "".join(out)


def component_processor(components: dict, path, name: str) -> dict:
    """An asset's processor of encoder component `name` (`components.NAME.processor`), or
    a refusal naming the asset: a model without that component takes no such input."""
    from zoo.core.asset.encoders import ENCODERS

    if not components.get(name):
        kind = ENCODERS[name]
        raise MediaError(
            f"{path} has no {name} component: it takes no {kind.noun}s ({kind.option}); export "
            f"a checkpoint with {'an' if name[0] in 'aeiou' else 'a'} {name} encoder, without "
            "--text-only"
        )
    return components[name]["processor"]


def soft_token_rows(prompt_ids, features: list[np.ndarray], processor: dict) -> dict:
    """Position in the prompt -> the soft token that replaces it: the inputs' soft tokens,
    in order, at the prompt's placeholder tokens of their kind (where the processor put
    them)."""
    where = [i for i, token in enumerate(prompt_ids) if token == processor["token_id"]]
    rows = [row for item in features for row in item]
    if len(where) != len(rows):
        raise MediaError(
            f"the prompt holds {len(where)} placeholder tokens and the inputs make {len(rows)} "
            "soft tokens: build the prompt with zoo.core.host.media.media_prompt"
        )
    return dict(zip(where, rows, strict=True))


# content items of the chat template, in the order a user turn holds them
CONTENT = {"vision": "image", "audio": "audio"}


def media_prompt(
    tokenizer, directory: Path, text: str, media: dict, processors: dict, system=None
) -> list[int]:
    """Prompt ids of the `media` (component -> its inputs: images, then audio clips) then
    `text` in one user turn through the chat template of `directory` (an asset carries its
    checkpoint's), each placeholder expanded as the processor expands it: what
    `processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)`
    gives with them."""
    from zoo.core.asset.tokenizer import chat_prompt

    media = {name: items for name, items in media.items() if items}
    items = [CONTENT[name] for name in CONTENT for _ in media.get(name, ())]
    rendered = chat_prompt(directory, text, system, media=items)
    for name, inputs in media.items():
        counts = [prepare(item, processors[name])["soft_tokens"] for item in inputs]
        rendered = expand_placeholders(rendered, counts, processors[name])
    return tokenizer.encode(rendered, add_special_tokens=False).ids


def processors_for(asset, media: dict) -> dict:
    """The asset's processor of each component `media` has inputs for (component -> its
    inputs), a missing component refused by name."""
    return {
        name: component_processor(asset.components, asset.path, name)
        for name, items in media.items()
        if items
    }


def asset_prompt(asset, text: str, images=(), audio=(), system=None) -> list[int]:
    """`media_prompt` for an asset (an `OpenedAsset` or its path): its tokenizer, template
    and processors."""
    from zoo.core.asset.opened import open_asset
    from zoo.core.asset.tokenizer import load_tokenizer

    asset = open_asset(asset) if isinstance(asset, (str, Path)) else asset
    media = {"vision": list(images), "audio": list(audio)}
    processors = processors_for(asset, media)
    tokenizer = load_tokenizer(asset.path / "tokenizer.json")
    return media_prompt(tokenizer, asset.path, text, media, processors, system)


def encode(function, items, processor: dict) -> list[tuple[np.ndarray, tuple]]:
    """Each input's soft tokens `[n, width]` from its encoder `function`, and its grid
    (t, h, w in patches: Qwen3.5's images; None otherwise)."""
    out = []
    for item in items:
        prepared = prepare(item, processor)
        inputs = {name: prepared[name] for name in function.input_names}
        soft = function(inputs)["soft_tokens"][0, : prepared["soft_tokens"]]
        out.append((soft, prepared.get("grid")))
    return out


def place_media(generator, ids: list[int], media: dict) -> None:
    """Before `Generator.feed(ids, ...)`: each input's soft tokens (`media`: component ->
    its inputs) at the ids' placeholder tokens of its kind, in order, and with multimodal
    RoPE (Qwen3.5's images) each token's three positions: transformers' `get_rope_index`
    from where the context stands."""
    start = generator.position
    for name, items in media.items():
        if not items:
            continue
        processor = component_processor(generator.asset.components, generator.asset.path, name)
        encoded = encode(generator.functions[name][0], items, processor)
        rows = soft_token_rows(ids, [soft for soft, _ in encoded], processor)
        generator.soft.update({start + i: row for i, row in rows.items()})
        if name == "vision" and generator.spec.mrope_section:
            grids = [grid for _, grid in encoded]
            place_rope(generator, ids, rows, grids, processor["settings"]["merge_size"])


def place_rope(generator, ids: list[int], rows: dict, grids: list, merge: int) -> None:
    """Multimodal RoPE positions (t, h, w) for `ids` fed next: text tokens on the diagonal,
    an image's tokens at (p, p + row, p + column), later text shifted past the image."""
    start, grids = generator.position, iter(grids)
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
    runs = image_runs(ids, generator.asset.components["vision"]["processor"]["token_id"])
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


def image_runs(ids: list[int], image_token: int) -> list[tuple[int, int]]:
    """[first, stop) of each run of consecutive image tokens in `ids`."""
    runs: list[tuple[int, int]] = []
    for i in range(len(ids)):
        if ids[i] == image_token:
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
