"""Audio on the host, without torch: a WAV file read, its log-mel frames computed as the
checkpoint's own feature extractor computes them, padded to the audio function's budget.

An asset with an audio component carries what its extractor needs (metadata.json's
`components.audio.processor`: the settings of the checkpoint's feature extractor, the token
budget, the audio tokens). `gemma4_audio_features` is the path of transformers 5.23's
`Gemma4AudioFeatureExtractor` re-written here (numpy); the tests hold it to the original.
"""

from __future__ import annotations

import math
import wave
from pathlib import Path

import numpy as np

from zoo.core.io.files import MediaError

# sample widths `wave` reads -> numpy's integer type and full scale
PCM = {1: (np.uint8, 128.0), 2: (np.int16, 32768.0), 4: (np.int32, 2147483648.0)}


def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """A PCM WAV file's samples (float32 in [-1, 1), channels averaged) and its sample rate,
    or a `MediaError` naming the file."""
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise MediaError(f"--audio {path}: {what}; pass a WAV file (16-bit PCM, 16 kHz)")
    try:
        with wave.open(str(path), "rb") as file:
            width, channels, rate = file.getsampwidth(), file.getnchannels(), file.getframerate()
            raw = file.readframes(file.getnframes())
    except (wave.Error, EOFError, OSError) as error:
        raise MediaError(f"--audio {path}: not a PCM WAV file ({error})") from None
    if width not in PCM:
        raise MediaError(
            f"--audio {path}: {8 * width}-bit samples; convert it to 16-bit PCM (for example "
            "`ffmpeg -i IN -ac 1 -ar 16000 -sample_fmt s16 OUT.wav`)"
        )
    kind, scale = PCM[width]
    samples = np.frombuffer(raw[: len(raw) - len(raw) % (width * channels)], dtype=kind)
    samples = samples.astype(np.float32)
    if kind is np.uint8:  # 8-bit WAV is unsigned
        samples -= 128.0
    samples = (samples / np.float32(scale)).reshape(-1, channels).mean(axis=1, dtype=np.float32)
    if not len(samples):
        raise MediaError(f"--audio {path}: the file holds no samples")
    return samples, rate


def prepare_clip(clip, processor: dict, path: str | Path | None = None) -> dict:
    """A clip (a WAV path, or its samples and rate) as its audio function's inputs and
    soft-token count, by the asset's processor kind; a refusal names the file (`path`, or
    the clip's own)."""
    named = clip if isinstance(clip, (str, Path)) else path
    samples, rate = read_wav(clip) if isinstance(clip, (str, Path)) else clip
    features = {"gemma4_audio": gemma4_audio_features, "gemma4_unified_audio": waveform_frames}
    try:
        return features[processor["kind"]](samples, rate, processor)
    except MediaError as error:
        if named is None:
            raise
        raise MediaError(f"--audio {named}: {error}") from None


def hertz_to_mel(hertz):
    """The HTK mel scale."""
    return 2595.0 * np.log10(1.0 + np.asarray(hertz, np.float64) / 700.0)


def mel_to_hertz(mels):
    return 700.0 * (10.0 ** (np.asarray(mels, np.float64) / 2595.0) - 1.0)


def mel_filters(bins: int, filters: int, low: float, high: float, rate: int) -> np.ndarray:
    """`[bins, filters]` triangular filters, evenly spaced on the HTK mel scale between
    `low` and `high` Hz, unnormalised (what transformers' `mel_filter_bank` gives with
    `norm=None, mel_scale="htk"`)."""
    edges = mel_to_hertz(np.linspace(hertz_to_mel(low), hertz_to_mel(high), filters + 2))
    frequencies = np.linspace(0, rate // 2, bins)
    widths = np.diff(edges)
    slopes = edges[None, :] - frequencies[:, None]
    rising = -slopes[:, :-2] / widths[:-1]
    falling = slopes[:, 2:] / widths[1:]
    return np.maximum(0.0, np.minimum(rising, falling))


def seconds_per_token(processor: dict) -> float:
    """How much of a clip one soft token covers: 4 mel frames (Gemma 4's conformer), or
    one frame of raw samples (Gemma 4 12B)."""
    settings = processor["settings"]
    rate = int(settings.get("sampling_rate", 16000))
    if processor["kind"] == "gemma4_unified_audio":
        return int(settings.get("audio_samples_per_token", 640)) / rate
    hop = int(settings.get("hop_length", round(rate * settings.get("hop_length_ms", 10) / 1000)))
    return 4 * hop / rate


def _checked_rate(rate: int, settings: dict) -> int:
    """The extractor's sampling rate, which the clip's must be (no silent resampling)."""
    want = int(settings.get("sampling_rate", 16000))
    if rate != want:
        raise MediaError(
            f"the audio is sampled at {rate} Hz; this model reads {want} Hz: resample it "
            f"(for example `ffmpeg -i IN -ac 1 -ar {want} OUT.wav`)"
        )
    return want


def _within_budget(tokens: int, samples: int, rate: int, budget: int, per_token: float) -> None:
    if tokens > budget:
        raise MediaError(
            f"the audio ({samples / rate:.1f} s) is longer than the asset reads in one clip "
            f"({budget * per_token:.2f} s, {budget} soft tokens): cut it, or export with a "
            "larger --audio-tokens"
        )


def waveform_frames(samples: np.ndarray, rate: int, processor: dict) -> dict:
    """`input_features` `[1, N, S]`: the clip cut into frames of S samples (the last padded
    with zeros), one a soft token, zero rows up to the budget of N; and `soft_tokens`: as
    `Gemma4UnifiedAudioFeatureExtractor` cuts it (Gemma 4 12B, no audio encoder)."""
    settings = processor["settings"]
    want = _checked_rate(rate, settings)
    size = int(settings.get("audio_samples_per_token", 640))
    budget = int(processor["audio_seq_length"])
    tokens = -(-len(samples) // size)
    _within_budget(tokens, len(samples), want, budget, size / want)
    frames = np.zeros(budget * size, np.float32)
    frames[: len(samples)] = np.asarray(samples, np.float32)
    return {"input_features": frames.reshape(1, budget, size), "soft_tokens": tokens}


def gemma4_audio_features(
    samples: np.ndarray, rate: int, processor: dict
) -> dict[str, np.ndarray | int]:
    """`input_features` `[1, F, mel bins]` (float32, zero where padded),
    `input_features_mask` `[1, F]` (1.0 for a real frame) for the audio function's `F`
    frames, and `soft_tokens` (how many the clip becomes), as `Gemma4AudioFeatureExtractor`
    and `Gemma4Processor` compute them."""
    settings = processor["settings"]
    want = _checked_rate(rate, settings)
    budget = int(processor["audio_seq_length"])
    frame = int(round(want * settings.get("frame_length_ms", 20.0) / 1000.0))
    hop = int(round(want * settings.get("hop_length_ms", 10.0) / 1000.0))
    frame, hop = int(settings.get("frame_length", frame)), int(settings.get("hop_length", hop))
    samples = np.asarray(samples, np.float32) * np.float32(settings.get("input_scale_factor", 1))
    padded = -(-len(samples) // 128) * 128  # the extractor pads to a multiple of 128 samples
    wave_ = np.zeros(padded + frame // 2, np.float32)  # semicausal: frame / 2 zeros before
    wave_[frame // 2 : frame // 2 + len(samples)] = samples
    real = np.zeros(len(wave_), bool)
    real[frame // 2 : frame // 2 + len(samples)] = True
    count = (len(wave_) - (frame + 1)) // hop + 1
    if count <= 0:
        raise MediaError(f"the audio is shorter than one {frame}-sample frame")
    tokens = _tokens(real[np.arange(count) * hop + frame].astype(np.float32))
    _within_budget(tokens, len(samples), want, budget, 4 * hop / want)
    features = _log_mel(wave_, count, frame, hop, settings)
    mask = real[np.arange(count) * hop + frame]  # a frame is real if its last sample is
    out_features = np.zeros((1, 4 * budget, features.shape[1]), np.float32)
    out_mask = np.zeros((1, 4 * budget), np.float32)
    out_features[0, :count] = features * mask[:, None]
    out_mask[0, :count] = mask
    return {"input_features": out_features, "input_features_mask": out_mask, "soft_tokens": tokens}


def _log_mel(wave_: np.ndarray, count: int, frame: int, hop: int, settings: dict) -> np.ndarray:
    starts = np.arange(count) * hop
    frames = wave_[starts[:, None] + np.arange(frame + 1)]  # frame + 1 samples each
    emphasis = settings.get("preemphasis", 0.0)
    if emphasis > 0.0 and settings.get("preemphasis_htk_flavor", True):
        first = frames[:, :1] * (1.0 - emphasis)
        frames = np.concatenate([first, frames[:, 1:-1] - emphasis * frames[:, :-2]], axis=-1)
    elif emphasis > 0.0:
        frames = frames[:, 1:] - emphasis * frames[:, :-1]
    else:
        frames = frames[:, :-1]
    window = np.hanning(frame + 1)[:-1].astype(np.float32)  # periodic Hann
    fft = 2 ** math.ceil(math.log2(frame)) * (2 if settings.get("fft_overdrive") else 1)
    magnitude = np.abs(np.fft.rfft(frames * window, n=fft, axis=-1))
    rate = int(settings.get("sampling_rate", 16000))
    bank = mel_filters(
        fft // 2 + 1,
        int(settings.get("feature_size", 128)),
        settings.get("min_frequency", 0.0),
        settings.get("max_frequency", 8000.0),
        rate,
    )
    log_mel = np.log(magnitude @ bank + np.float64(settings.get("mel_floor", 1e-3)))
    if settings.get("per_bin_mean") is not None:
        log_mel = log_mel - np.asarray(settings["per_bin_mean"])
    if settings.get("per_bin_stddev") is not None:
        log_mel = log_mel / np.asarray(settings["per_bin_stddev"])
    return log_mel.astype(np.float32)


def _tokens(frame_mask: np.ndarray) -> int:
    """Soft tokens of a clip: its real frames through two stride-2 convolutions (what
    `Gemma4Processor.replace_audio_token` counts)."""
    for _ in range(2):
        frame_mask = frame_mask[::2][: (len(frame_mask) - 1) // 2 + 1]
    return int(frame_mask.sum())
