"""Images and audio clips that cannot be read, or read as something else: `zoo generate
--image / --audio` on the tiny Gemma 4 with a vision and an audio encoder (capacity 128),
a child process each (it loads the runtime)."""

from __future__ import annotations

from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run

SURFACE = "media"
TEXT = ("--prompt", "w5 w6", "--max-new-tokens", "3")


def media_asset(bench: Bench) -> Path:
    return bench.asset("--capacity", "128", "--chunk", "4", model="gemma4")


def png(folder: Path, size=(40, 30), mode: str = "RGB", name: str = "x.png", **save) -> Path:

    from zoo.testing_media import random_image

    image = random_image(size[1], size[0], seed=1).convert(mode)
    image.save(folder / name, **save)
    return folder / name


def wav(folder: Path, seconds: float = 0.8, name: str = "x.wav", **format_) -> Path:
    from zoo.testing_media import write_wav

    write_wav(folder / name, seconds, seed=2, **format_)
    return folder / name


def written(data: bytes, name: str):
    def write(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name

    return write


def case(
    name: str,
    option: str,
    write,
    names: tuple[str, ...] = (),
    *more_options: str,
    model_asset=media_asset,
    **more,
) -> Case:
    """`zoo generate` with `option FILE`, FILE as `write(folder)` makes it."""

    def make(bench: Bench, folder: Path) -> Run:
        return Run(
            ["generate", str(model_asset(bench)), option, str(write(folder)), *TEXT, *more_options]
        )

    return Case(SURFACE, name, make, names=names, child=True, **more)


def answered(folder: Path, result: Result) -> str | None:
    said = result.out.split()
    return None if len(said) >= 1 else f"no answer: {result.err[-200:]}"


def _truncated(folder: Path) -> Path:
    path = png(folder)
    path.write_bytes(path.read_bytes()[:120])
    return path


def _huge(folder: Path) -> Path:
    from PIL import Image

    Image.new("1", (20000, 20000)).save(folder / "x.png")  # 48 kB on disk, 400 M pixels
    return folder / "x.png"


def _folder(folder: Path) -> Path:
    (folder / "x.png").mkdir()
    return folder / "x.png"


def _animated(folder: Path) -> Path:
    from zoo.testing_media import random_image

    frames = [random_image(30, 40, seed=s) for s in range(3)]
    frames[0].save(folder / "x.gif", save_all=True, append_images=frames[1:])
    return folder / "x.gif"


def _pcm24(folder: Path) -> Path:
    import wave

    with wave.open(str(folder / "x.wav"), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(3)
        file.setframerate(16000)
        file.writeframes(bytes(3 * 8000))
    return folder / "x.wav"


def _both(bench: Bench, folder: Path) -> Run:
    return Run(
        [
            "generate",
            str(media_asset(bench)),
            "--image",
            str(png(folder)),
            "--audio",
            str(wav(folder)),
            *TEXT,
        ]
    )


def _two_images(bench: Bench, folder: Path) -> Run:
    first, second = png(folder, name="a.png"), png(folder, (30, 40), name="b.png")
    return Run(
        ["generate", str(media_asset(bench)), "--image", str(first), "--image", str(second), *TEXT]
    )


def _with_ids(bench: Bench, folder: Path) -> Run:
    return Run(
        ["generate", str(media_asset(bench)), "--image", str(png(folder)), "--prompt-ids", "2,3"]
    )


CASES = [
    case("a PNG", "--image", png, works=True, check=answered),
    case("a 1 x 1 PNG", "--image", lambda f: png(f, (1, 1)), works=True, check=answered),
    case("a 2 x 900 PNG", "--image", lambda f: png(f, (2, 900)), works=True, check=answered),
    case("an RGBA PNG", "--image", lambda f: png(f, mode="RGBA"), works=True, check=answered),
    case(
        "a greyscale JPEG",
        "--image",
        lambda f: png(f, mode="L", name="x.jpg"),
        works=True,
        check=answered,
    ),
    case("an animated GIF", "--image", _animated, works=True, check=answered),
    case("a truncated PNG", "--image", _truncated, ("x.png",)),
    case("a 20,000 x 20,000 PNG", "--image", _huge, ("x.png",)),
    case("text named .png", "--image", written(b"not an image\n", "x.png"), ("x.png",)),
    case("an empty .png", "--image", written(b"", "x.png"), ("x.png",)),
    case("an image not there", "--image", lambda f: f / "x.png", ("x.png",)),
    case("a folder named .png", "--image", _folder, ("x.png",)),
    Case(SURFACE, "an image with --prompt-ids", _with_ids, names=("--prompt",), child=True),
    # two images of the tiny model's budget are more tokens than a capacity of 128 holds
    Case(SURFACE, "two images past the context", _two_images, names=("--capacity",), child=True),
    Case(SURFACE, "an image and a clip", _both, works=True, check=answered, child=True),
    case("a WAV clip", "--audio", wav, works=True, check=answered),
    case("a stereo WAV", "--audio", lambda f: wav(f, channels=2), works=True, check=answered),
    case("an 8-bit WAV", "--audio", lambda f: wav(f, width=1), works=True, check=answered),
    case("a WAV at 8 kHz", "--audio", lambda f: wav(f, rate=8000), ("x.wav", "16")),
    case("a WAV of no samples", "--audio", lambda f: wav(f, seconds=0), ("x.wav",)),
    case("a WAV shorter than a frame", "--audio", lambda f: wav(f, seconds=0.005), ("x.wav",)),
    case("a WAV longer than the budget", "--audio", lambda f: wav(f, seconds=40), ("x.wav",)),
    case("a 24-bit WAV", "--audio", lambda f: _pcm24(f), ("x.wav", "24")),
    case("text named .wav", "--audio", written(b"RIFF? no\n", "x.wav"), ("x.wav",)),
    case("a PNG named .wav", "--audio", lambda f: png(f, name="x.wav", format="PNG"), ("x.wav",)),
    case("a clip not there", "--audio", lambda f: f / "x.wav", ("x.wav",)),
]
