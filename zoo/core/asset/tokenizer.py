"""Text in and out of a zoo asset: its tokenizer.json and the checkpoint's chat template."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zoo.core.asset.opened import OpenedAsset, open_asset

# What generating text needs beside the weights; an export copies the ones a checkpoint has
# into the asset (and Apple's engine bundle into its `tokenizer/`), so neither needs the
# checkpoint again.
GENERATION_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
)


def generation_files(checkpoint: Path) -> list[Path]:
    """The `GENERATION_FILES` a checkpoint directory has (regular files only)."""
    return [checkpoint / n for n in GENERATION_FILES if (checkpoint / n).is_file()]


def is_bundle(path: Path) -> bool:
    """A bundle folder for Apple's engine (`--target apple-engine`), not a zoo asset."""
    return path.suffix != ".aimodel" and (path / "metadata.json").is_file()


def tokenizer_path(asset: Path | OpenedAsset, given: Path | None = None) -> Path:
    """The tokenizer.json for `generate ASSET --prompt`: `--tokenizer`, a bundle's own, the
    asset's own (copied at export), or, for an asset exported before the zoo copied it, the
    one beside the checkpoint its metadata names."""
    if given is not None:
        if given.is_dir() or not given.exists():
            what = "is a directory" if given.is_dir() else "no such file"
            raise FileNotFoundError(f"--tokenizer {given}: {what}; pass a tokenizer.json")
        return given
    opened = asset if isinstance(asset, OpenedAsset) else None
    asset = opened.path if opened else Path(asset)
    if is_bundle(asset):
        return asset / "tokenizer" / "tokenizer.json"
    if (asset / "tokenizer.json").is_file():
        return asset / "tokenizer.json"
    decode = (opened or open_asset(asset, verify=False)).decode
    if decode is None:
        raise ValueError(f"{asset} has no decode spec: it was not exported for generate")
    source = decode.get("checkpoint")
    if source and Path(source).is_absolute() and (Path(source) / "tokenizer.json").is_file():
        return Path(source) / "tokenizer.json"
    raise FileNotFoundError(
        f"{asset} has no tokenizer.json (its checkpoint had none): pass --tokenizer PATH, "
        "or --prompt-ids"
    )


def load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    if not Path(path).is_file():  # a FIFO would block the reader, a directory fail later
        raise ValueError(f"{path} is not a regular file: pass a tokenizer.json")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:
        raise ValueError(f"{path} is not a tokenizer.json ({error})") from None


def chat_prompt(
    directory: Path, user_text: str, system: str | None = None, media: Sequence[str] = ()
) -> str:
    """`user_text` as one user turn (after a `system` turn, if given; after the `media`
    items, e.g. `("image", "audio")`, as a list of content items, when there are any)
    through the chat template of a checkpoint directory
    (chat_template.jinja, or tokenizer_config.json's "chat_template"), ready for the
    model's reply, rendered in a sandbox as transformers renders it."""
    from zoo.core.io.files import read_json

    config_path = directory / "tokenizer_config.json"
    config = read_json(config_path) if config_path.exists() else {}
    template = config.get("chat_template")
    jinja = directory / "chat_template.jinja"
    if jinja.exists() and not jinja.is_file():  # a FIFO would block the reader
        raise ValueError(f"{jinja} is not a regular file: put the template file there")
    if jinja.exists():
        template = jinja.read_text()
    if isinstance(template, list):  # named templates: the default one
        template = {t.get("name"): t.get("template") for t in template}.get("default")
    if not isinstance(template, str):
        raise FileNotFoundError(
            f"no chat template in {directory} (chat_template.jinja or tokenizer_config.json): "
            "drop --chat, or pass --tokenizer from a checkpoint that has one"
        )

    def special(name: str) -> str:
        value = config.get(name) or ""
        return value.get("content", "") if isinstance(value, dict) else value

    def raise_exception(message: str):
        raise ValueError(f"the chat template refused the prompt: {message}")

    from jinja2 import TemplateSyntaxError

    where = directory / "chat_template.jinja"
    where = where if where.exists() else directory / "tokenizer_config.json"
    environment = _bounded_environment(where)
    try:
        compiled = environment.from_string(template)
    except TemplateSyntaxError as error:
        raise ValueError(
            f"{where}: the chat template has a syntax error (line {error.lineno}: {error.message})"
        ) from None
    rendered = compiled.generate(
        messages=[
            *([{"role": "system", "content": system}] if system is not None else []),
            {"role": "user", "content": _content(user_text, media)},
        ],
        add_generation_prompt=True,
        bos_token=special("bos_token"),
        eos_token=special("eos_token"),
        raise_exception=raise_exception,
    )
    pieces, size = [], 0
    for piece in rendered:
        size += len(piece)
        if size > TEMPLATE_CHARACTERS:
            environment.refuse(f"wrote over {TEMPLATE_CHARACTERS:,} characters")
        pieces.append(piece)
    return "".join(pieces)


def _content(text: str, media: Sequence[str]):
    """A user turn's content: the text, or (with media) the media items then the text,
    as items (`{"type": "image"}`, `{"type": "audio"}`, `{"type": "text", "text": ...}`), as
    transformers passes them to a processor's template."""
    if not media:
        return text
    return [{"type": kind} for kind in media] + [{"type": "text", "text": text}]


# A chat template is code from the checkpoint: its rendering gets a time and a size
# limit (a real template renders a turn in milliseconds, in a few hundred characters).
TEMPLATE_SECONDS = 5.0
TEMPLATE_CHARACTERS = 1_000_000


def _bounded_environment(where: Path):
    """Jinja's immutable sandbox (as transformers renders templates), with every loop over
    `range`, call and `*`/`**` checked against `TEMPLATE_SECONDS` and the size limit."""
    import time

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    deadline = time.monotonic() + TEMPLATE_SECONDS

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def refuse(self, why: str):
            raise ValueError(
                f"{where}: the chat template {why} rendering one turn; it is not a chat "
                "template to run (use --prompt-ids, or a checkpoint's own template)"
            )

        def tick(self) -> None:
            if time.monotonic() > deadline:
                self.refuse(f"ran over {TEMPLATE_SECONDS:g} s")

        def call(self, context, obj, *args, **kwargs):
            self.tick()
            return super().call(context, obj, *args, **kwargs)

        def call_binop(self, context, operator, left, right):
            self.tick()
            sized = [len(v) for v in (left, right) if isinstance(v, str | list | tuple)]
            times = [v for v in (left, right) if isinstance(v, int)]
            if operator == "*" and sized and times and sized[0] * times[0] > TEMPLATE_CHARACTERS:
                self.refuse(f"wrote over {TEMPLATE_CHARACTERS:,} characters")
            if operator == "**" and isinstance(right, int | float) and abs(right) > 64:
                self.refuse(f"raised a number to the power {right}")
            return super().call_binop(context, operator, left, right)

    environment = Bounded(trim_blocks=True, lstrip_blocks=True)

    def bounded_range(*args):
        for step, value in enumerate(range(*args)):
            if step % 1024 == 0:
                environment.tick()
            yield value

    environment.globals["range"] = bounded_range
    return environment


def encode_prompt(
    tokenizer, directory: Path, text: str, chat: bool = False, system: str | None = None
) -> list[int]:
    """Prompt ids of `text`: as it is (with the tokenizer's own special tokens, e.g. a
    bos), or with `chat` as one user turn through the chat template of `directory`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the prompt is not valid UTF-8 text; pass text, or --prompt-ids") from None
    if not text.strip():
        raise ValueError("the prompt is empty; give it some text (or --prompt-ids)")
    if chat:  # the template writes the special tokens itself (bos, turn markers)
        rendered = chat_prompt(directory, text, system)
        return tokenizer.encode(rendered, add_special_tokens=False).ids
    return tokenizer.encode(text).ids
