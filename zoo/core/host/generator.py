"""The host loop: prompt ids in, new token ids out, on the Core AI runtime.

`Generator` drives an asset through the functions its `DecodeSpec` names: whole chunks
through prefill (pipelined over layer ranges), the rest one token at a time through decode,
then greedy or sampled decoding. No torch and no model code: numpy and the runtime only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from zoo.core.asset.decode_spec import ContextFullError, DecodeSpec
from zoo.core.asset.opened import OpenedAsset, open_asset
from zoo.core.host.request import GenerationRequest, check_token_ids
from zoo.core.host.runtime import Model
from zoo.core.host.sampling import sample


def passed_on(carried: dict, outputs: dict) -> dict:
    """What a layer range's call leaves for the next: its NAME_out outputs as inputs NAME
    (beside what earlier ranges passed on), and the logits of the last."""
    fresh = {name[: -len("_out")]: v for name, v in outputs.items() if name.endswith("_out")}
    return {**carried, **fresh, **({"logits": outputs["logits"]} if "logits" in outputs else {})}


class _Loaded(dict):
    """Kind (or span) -> its functions, each list loaded from the model on first use."""

    def __init__(self, model: Model, names: dict) -> None:
        super().__init__()
        self.model, self.names = model, names

    def __missing__(self, kind):
        if kind not in self.names:
            raise KeyError(kind)
        self[kind] = [self.model.function(name) for name in self.names[kind]]
        return self[kind]

    def __contains__(self, kind) -> bool:
        return kind in self.names

    def load_all(self) -> None:
        """Load every kind's functions now (before a clock starts, or a log is hidden)."""
        for kind in self.names:
            self[kind]


class Generator:
    """Prompt ids in, new token ids out, on the Core AI runtime.

    >>> with Generator("gemma4.aimodel") as generator:            # doctest: +SKIP
    ...     ids = generator.generate([2, 651, 6037], max_new_tokens=8)
    """

    def __init__(
        self, asset: str | os.PathLike | OpenedAsset, compute_unit: str | None = None
    ) -> None:
        self.asset = open_asset(asset)  # metadata.json read once, the files checked
        self.spec = DecodeSpec.of_asset(self.asset)
        self.model = Model.load(self.asset, compute_unit)
        # each kind of call: one function, or one per layer range (zoo.core.export.ranges), loaded
        # when first called (the runtime holds a loaded function's expanded weights)
        self.functions = _Loaded(
            self.model,
            {
                kind: self.spec.function_names(kind)
                for kind in (
                    "prefill",
                    "decode",
                    *(self.spec.verify_kind(width) for width in self.spec.widths),
                    *["prefill_media"] * bool(self.spec.media_chunk),
                )
            }
            # each encoder component's one function (zoo.core.export.components)
            | {name: [name] for name in self.asset.components if name != "decoder"},
        )
        # prefill over the first `span` columns of the caches (DecodeSpec.spans)
        self.spanned = _Loaded(
            self.model,
            {span: self.spec.function_names("prefill", span) for span in self.spec.spans or []},
        )
        self.sidecars = self.spec.open_sidecars(self.asset.path)  # rows looked up per token
        self.ran: list[str] = []  # the functions the last feed() or score() called, in order
        # called before each runtime call (a long prefill is many): `zoo generate` takes a
        # pending Ctrl-C there; what it raises ends the feed, the context then undefined
        self.between_calls: Callable[[], None] | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the context: fresh zeroed states (every function of a kind holds them)."""
        self.states = {}
        for function in self.functions["decode"]:
            self.states.update(function.new_states())
        self.position = 0
        self.soft: dict[int, np.ndarray] = {}  # position -> an encoder's soft token there
        # multimodal RoPE (DecodeSpec.mrope_section): position -> its (t, h, w) where images
        # placed it, and the shift of every later position
        self.rope: dict[int, tuple[int, int, int]] = {}
        self.rope_shift = 0

    def _fitting(self, ids: Sequence[int], context: int, advice: str) -> list[int]:
        """`ids` as a list, refused if empty, out of the vocabulary, or past `context`."""
        ids = list(ids)
        if not ids:
            raise ValueError("feed() needs at least one token")
        check_token_ids(ids, self.spec.vocab_size)
        if self.position + len(ids) > context:
            raise ContextFullError(
                f"the context holds {context} tokens: {self.position} are used and "
                f"{len(ids)} more do not fit; {advice}"
            )
        return ids

    def feed(self, ids: Sequence[int], images: Sequence = (), audio: Sequence = ()) -> np.ndarray:
        """Append tokens to the context; returns the logits after the last one. Whole chunks
        go through prefill (pipelined over layer ranges), the rest one token at a time.
        `images` (paths or PIL images; an asset with a vision component) and `audio` (WAV
        paths or (samples, rate); an audio component): their soft tokens replace the ids'
        placeholder tokens of their kind, in order (`zoo.core.host.media.asset_prompt`)."""
        ids = self._fitting(ids, self.spec.capacity, "export with a larger --capacity")
        if images or audio:  # soft tokens (and RoPE positions) at the placeholders
            from zoo.core.host.media import place_media

            place_media(self, ids, {"vision": images, "audio": audio})
        self.ran = []
        if self.spec.media_chunk and images:  # each image's tokens in one call of their own
            from zoo.core.host.media import feed_around_images

            return feed_around_images(self, ids)
        return self._feed_text(ids)

    def _feed_text(self, ids: list[int]) -> np.ndarray:
        chunk = self.spec.chunk
        whole = min(len(ids), self.spec.capacity - self.position) // chunk
        pieces = [ids[i * chunk : (i + 1) * chunk] for i in range(whole)]
        logits = self._prefill(pieces) if pieces else None
        for token in ids[whole * chunk :]:  # the rest, and anything past the end
            logits = self._call("decode", [token])
        return logits[0, -1].astype(np.float32)

    def _functions(self, kind: str, end: int) -> tuple[list, int | None]:
        """The functions of one `kind` call ending before position `end`: the shortest
        attention span's that holds it (prefill only), and that span (None: the whole
        context)."""
        span = self.spec.span_for(end)
        functions, span = (
            (self.spanned[span], span)
            if kind == "prefill" and span in self.spanned
            else (self.functions[kind], None)
        )
        self.ran.extend(function.name for function in functions)
        return functions, span

    def _inputs(self, function, piece: list[int], position: int, carried=None, span=None) -> dict:
        """What `function` declares, for `piece` at `position` (`carried`: what the earlier
        ranges passed on to a later one, by input name; `span`: its attention span)."""
        ids_array = np.array([piece], np.int32)
        soft = {}
        if "soft_tokens" in function.inputs:  # an asset that reads images: pad ids there
            from zoo.core.host.media import soft_inputs

            pad = next(
                part["processor"]["pad_token_id"]
                for part in self.asset.components.values()
                if "processor" in part
            )
            soft = soft_inputs(self, position, len(piece))
            ids_array = np.where(soft["soft_mask"][..., 0] > 0, pad, ids_array).astype(np.int32)
        inputs = {
            **soft,
            "input_ids": ids_array,
            **self.spec.host_inputs(position, len(piece), span),
            **self.spec.token_inputs(ids_array, self.sidecars),
        }
        inputs.update(carried or {})
        # Masks go in the dtype the function declares (fp16 for an fp16 export).
        return {
            name: value.astype(function.inputs[name][1]) if value.dtype.kind == "f" else value
            for name, value in inputs.items()
            if name in function.inputs
        }

    def encode(self, name: str, items: Sequence) -> list[np.ndarray]:
        """Each input through the asset's encoder component `name` ("vision": file paths or
        PIL images; "audio": WAV paths or (samples, rate)): its soft tokens `[n, width]`,
        prepared as the checkpoint's processor prepares it."""
        from zoo.core.host.media import component_processor, encode

        processor = component_processor(self.asset.components, self.asset.path, name)
        return [soft for soft, _ in encode(self.functions[name][0], items, processor)]

    def _start(self, function, piece: list[int], position: int, carried=None, span=None):
        states = {name: self.states[name] for name in function.state_names}
        return function.start(self._inputs(function, piece, position, carried, span), states)

    def _call(self, kind: str, piece: list[int]) -> np.ndarray:
        """One `kind` call on `piece` at the current position, range after range: logits."""
        carried: dict = {}
        functions, span = self._functions(kind, self.position + len(piece))
        for function in functions:
            if self.between_calls:
                self.between_calls()
            outputs = self._start(function, piece, self.position, carried, span).result()
            carried = passed_on(carried, outputs)
        self.position += len(piece)
        return outputs["logits"]

    def _prefill(self, pieces: list[list[int]]) -> np.ndarray:
        """Whole chunks through prefill: the logits after the last. With layer ranges, the
        calls of one wave run together: range r of chunk k beside range r + 1 of chunk
        k - 1. Each state sees one call at a time, in chunk order: a call whose states a
        running call also holds (Gemma 4's KV-shared layers read an earlier range's cache)
        waits for it."""
        chunk = self.spec.chunk
        # each chunk's functions: the shortest attention span that holds it
        calls = [
            self._functions("prefill", self.position + (k + 1) * chunk) for k in range(len(pieces))
        ]
        ranges = len(self.functions["prefill"])
        carried: list[dict] = [{} for _ in pieces]  # what each chunk's next range reads
        for wave in range(len(pieces) + ranges - 1):
            if self.between_calls:
                self.between_calls()
            first = max(0, wave - ranges + 1)
            running: list = []  # (chunk, call, its states), oldest chunk first
            for k in range(first, min(wave, len(pieces) - 1) + 1):
                functions, span = calls[k]
                function = functions[wave - k]
                held = set(function.state_names)
                for other in [r for r in running if r[2] & held]:
                    self._finish(other, carried)
                    running.remove(other)
                position = self.position + k * chunk
                call = self._start(function, pieces[k], position, carried[k], span)
                running.append((k, call, held))
            for entry in running:
                self._finish(entry, carried)
        self.position += chunk * len(pieces)
        return carried[-1]["logits"]

    @staticmethod
    def _finish(running: tuple, carried: list[dict]) -> None:
        k, call, _ = running
        carried[k] = passed_on(carried[k], call.result())

    def score(self, ids: Sequence[int]) -> np.ndarray:
        """Append tokens to the context; returns the logits after each of them `[T, vocab]`
        (row i scores the token after ids[i]). Needs an asset exported with `score_chunk`."""
        if "score" not in self.functions:
            raise ValueError(
                "this asset has no score function: export it with score_chunk=N "
                "(zoo.core.export.functions.export_model) to read every row's logits"
            )
        ids = self._fitting(ids, self.spec.capacity, "score fewer tokens or export longer")
        self.ran, rows = [], []
        chunk = self.spec.score_chunk
        while ids:
            piece = ids[:chunk] if len(ids) >= chunk else ids[:1]
            rows.append(self._call("score" if len(piece) == chunk else "decode", piece)[0])
            ids = ids[len(piece) :]
        return np.concatenate(rows).astype(np.float32)

    def verify(self, ids: Sequence[int]) -> np.ndarray:
        """One verify call on exactly one of the asset's verify widths of ids
        (`DecodeSpec.widths`: `score_chunk`, and narrower ones exported beside it) at the
        current position: a row of logits after each `[T, vocab]`; the position moves past
        them (`rewind` takes it back past the ones rejected: `zoo.core.host.speculative`)."""
        ids = self._fitting(ids, self.spec.capacity, "verify nearer the start")
        kind = self.spec.verify_kind(len(ids))
        self.ran = []
        return self._call(kind, ids)[0].astype(np.float32)

    def rewind(self, position: int) -> None:
        """Take the position back to `position`: what was written past it stays in cache
        columns every mask hides until a later call writes them again. KV caches only: a
        recurrent state cannot be taken back (`zoo.core.host.speculative.check_rewindable`)."""
        if not 0 <= position <= self.position:
            raise ValueError(f"rewind goes back from {self.position}, not to {position}")
        self.position = position

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int | None = None,
        *,
        stop_token_ids: Sequence[int] | None = None,
        temperature: float = 0.0,
        top_k: int | None = None,
        seed: int | None = None,
        on_token: Callable[[int], None] | None = None,
        images: Sequence = (),
        audio: Sequence = (),
    ) -> list[int]:
        """Greedy (or seeded sampled) continuation of `prompt_ids`, from a fresh context:
        the options of a `GenerationRequest`, checked before anything runs.

        Stops after `max_new_tokens` (None: as many as the context holds), or at a stop
        token (included in the result); a request that cannot fit the context raises
        `ContextFullError` before decoding.
        """
        request = GenerationRequest(
            tuple(prompt_ids),
            max_new_tokens,
            None if stop_token_ids is None else tuple(stop_token_ids),
            temperature,
            top_k,
            seed,
            tuple(images),
            tuple(audio),
        )
        return self.run(request, on_token)

    def run(
        self, request: GenerationRequest, on_token: Callable[[int], None] | None = None
    ) -> list[int]:
        """Carry out a `GenerationRequest` (see `generate`)."""
        request = request.fitted(self.spec)
        stops = set(request.stop_token_ids)
        rng = np.random.default_rng(request.seed)
        self.reset()
        logits = self.feed(request.prompt_ids, request.images, request.audio)
        new: list[int] = []
        while len(new) < request.max_new_tokens:
            token = sample(logits, request.temperature, request.top_k, rng)
            new.append(token)
            if on_token is not None:
                on_token(token)
            if token in stops or len(new) == request.max_new_tokens:
                break
            logits = self.feed([token])
        return new

    def close(self) -> None:
        self.model.close()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- one call of the runtime, whole: what a child process runs (`zoo.core.isolate.run_isolated`)
# and returns as plain lists (a runtime crash then kills the child, not the caller)


def greedy_on_runtime(asset: str, prompt: list[int], new_tokens: int = 8) -> list[int]:
    """Greedy tokens from an exported decoder (run it with `run_isolated`: it may crash)."""
    return runtime_greedy(asset, prompt, new_tokens)["tokens"]


def runtime_greedy(asset: str, prompt: list[int], new_tokens: int = 8, images=(), audio=()) -> dict:
    """Greedy tokens and the logits each was chosen from, on the Core AI runtime (run it
    with `run_isolated`); `images` and `audio` (file paths) for the prompt's placeholders."""
    with Generator(asset) as generator:
        logits = generator.feed(prompt, images, audio)
        tokens, rows = [], []
        for _ in range(new_tokens):
            rows.append(logits.tolist())
            tokens.append(int(np.argmax(logits)))
            logits = generator.feed([tokens[-1]])
    return {"tokens": tokens, "logits": rows}


def runtime_feed_logits(asset: str, pieces: list[list[int]]) -> dict:
    """The logits after each piece fed in turn, and the functions the calls ran, in order
    (run it with `run_isolated`)."""
    logits, called = [], []
    with Generator(asset) as generator:
        for piece in pieces:
            logits.append(generator.feed(piece).tolist())
            called += generator.ran
    return {"logits": logits, "called": called}


def prefill_logits(asset: str, ids: list[int]) -> dict:
    """On the runtime (run it with `run_isolated`): the logits after `ids` read in one
    `Generator.feed` (whole chunks through prefill, pipelined over the ranges), the asset's
    prefill functions, and the functions the feed called in order (`ran`)."""
    with Generator(asset) as generator:
        logits = generator.feed(ids)
        names = [function.name for function in generator.functions["prefill"]]
        return {"logits": logits.tolist(), "prefill functions": names, "ran": generator.ran}
