"""One export, planned: every option resolved and checked once, before anything is loaded.

`plan_export(checkpoint, output, ...)` reads the checkpoint's config.json and safetensors
headers (no weights), picks the entry from its `model_type`, resolves the platform's
defaults (prefill chunk, weights and keys layout), and refuses what cannot be written (the
destination, the room on disk, the chunk, spans, layer ranges, the preset) with one line
naming the option. The result is a frozen `ExportPlan`: `zoo export --dry-run` prints it,
`zoo.core.export.run.run_plan` executes it (load -> compress -> convert -> write), and
`export_model` (a model already loaded) builds the same plan with `plan_for_model`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from zoo.core.asset.decode_spec import KV_CACHES, check_capacity, check_spans, check_verify_widths
from zoo.core.export.fit import BYTES_PER_WEIGHT, CONVERTER_COPIES, OTHER_BYTES_PER_WEIGHT
from zoo.core.export.options import calibration_file, export_options, keywords_doc


@dataclass(frozen=True)
class ExportPlan:
    """What one export will do, resolved and checked (`plan_export`)."""

    entry: str  # the zoo entry (`zoo.NAME`)
    checkpoint: Path | None  # None: a model built in memory (`plan_for_model`)
    output: Path
    strategy: str  # KV write strategy (zoo.core.asset.kv_writes)
    capacity: int  # tokens the KV cache holds
    chunk: int  # tokens per prefill call
    compress: str  # zoo.core.compression.presets preset
    weights: str  # stored projection layout (zoo.core.model.layout)
    keys: str  # key cache layout
    layers: int  # decoder layers
    kv_cache: str = "fp32"  # fp32, or int8 codes and scales (zoo.core.model.kv_cache)
    encoding: str = (
        "coreai-opt"  # how compressed weights are written (zoo.core.compression.encoding)
    )
    first_layers: int | None = None  # only the first N layers, then norm and head: a draft
    ranges: tuple[tuple[int, int], ...] | None = None  # layer ranges, one function each
    spans: tuple[int, ...] | None = None  # prefill attention spans below the capacity
    sidecar: bool | None = None  # lookup tables as int8 files (entries that have them)
    experts: str | None = None  # mixtures of experts: "chosen" or "all" (zoo.core.model.experts)
    score_chunk: int | None = None  # a `score` function of this many tokens (zoo.quality)
    verify_widths: tuple[int, ...] | None = None  # narrower verify functions beside it
    calibration: Path | None = None  # a text file a calibrated preset learns from (gptq:)
    overwrite: bool = False
    target: str = (
        "zoo"  # or "apple-engine": a bundle for Apple's engine (zoo.core.export.apple_engine)
    )
    model_id: str | None = None  # apple-engine: the hub name the bundle records
    streamed: bool = False  # range by range, one part each (zoo.core.export.stream)
    # the asset's components (zoo.core.export.components): "decoder", and "vision" or "audio" when
    # the checkpoint has such an encoder the entry reads; their sizes, or why left out
    components: tuple[str, ...] = ("decoder",)
    left_out: str = ""
    # each encoder's processor as the asset stores it, its token budget applied
    processors: dict = field(default_factory=dict)
    parameters: int = 0  # values in the checkpoint's tensors the model reads
    held_parameters: int = 0  # of those, the most held at once (the largest range streamed)
    estimated_bytes: int = 0  # the asset on disk
    state_bytes: int = 0  # its KV caches (and recurrent states) at the capacity, as it runs
    # what the export may not do as asked: past this machine's memory (zoo.core.export.fit), a
    # context longer than the model's positions
    warnings: tuple[str, ...] = ()
    # the checkpoint's config as the plan read it (config.json read once an export): the
    # load takes it; not an option, not shown
    config: object = field(default=None, repr=False, compare=False)

    @property
    def estimated_peak_bytes(self) -> int:
        """Peak memory of the export, estimated: the weights held in float32 (compressed
        as read: codes) while the converter holds the program it writes, about
        `CONVERTER_COPIES` times the asset's bytes (measured, see the constant)."""
        held = self.held_parameters or self.parameters
        per_weight = 4 if self.compress in ("fp32", "fp16") else 1.2
        program = self.estimated_bytes * held / max(1, self.parameters)
        return int(held * per_weight + CONVERTER_COPIES * program)

    def functions(self) -> str:
        """What the export converts: `prefill + decode + verify of 4, 8 tokens, layer
        ranges: one`, as the dry run and the export's progress line say it."""
        ranges = (
            f"{len(self.ranges)} range{'s' * (len(self.ranges) != 1)} "
            f"{[list(r) for r in self.ranges]}"
            if self.ranges
            else "one"
        )
        if self.target == "apple-engine":
            return "main + prefill, in the contract of Apple's engine (a bundle folder)"
        widths = sorted({*(self.verify_widths or ()), self.score_chunk} - {None})
        verify = f" + verify of {', '.join(map(str, widths))} tokens" if widths else ""
        spans = f" + prefill over spans of {', '.join(map(str, self.spans))}" if self.spans else ""
        encoders = "".join(f" + {name} (the {name} encoder)" for name in self.components[1:])
        return f"prefill + decode{verify}{spans}{encoders}, layer ranges: {ranges}"

    def describe(self) -> str:
        """The plan as `zoo export --dry-run` prints it (paths under home as `~/...`, as the
        progress lines show them)."""
        from zoo.core.io.shown import readable_bytes, shown

        replaced = self.overwrite and self.output.exists()
        rows = [
            ("entry", f"zoo.{self.entry}"),
            ("checkpoint", shown(self.checkpoint) if self.checkpoint else "(a model in memory)"),
            ("output", f"{shown(self.output)}{' (replacing the asset there)' if replaced else ''}"),
            ("KV strategy", self.strategy),
            ("capacity", f"{self.capacity} tokens"),
            ("prefill chunk", f"{self.chunk} tokens"),
            (
                "weights",
                f"{self.compress}, layout {self.weights}, keys {self.keys}"
                + (f", encoding {self.encoding}" if self.encoding != "coreai-opt" else ""),
            ),
            ("KV cache", KV_CACHES[self.kv_cache] + self._state_size()),
            *([("calibration", str(self.calibration))] if self.calibration else []),
            (
                "components",
                "; ".join([" + ".join(self.components), self.left_out][: 1 + bool(self.left_out)]),
            ),
            ("functions", self.functions()),
            *(
                [("layers", f"the first {self.layers}, then the final norm and head (a draft)")]
                if self.first_layers
                else []
            ),
            (
                "export",
                f"range by range, one part each (at most {self.held_parameters:,} weights "
                "held at once"
                + (
                    "; one range holds the whole model: --layers-per-function N sets a "
                    "range's size)"
                    if self.ranges and len(self.ranges) == 1
                    else ")"
                )
                if self.streamed
                else "in one piece (the whole model held at once)",
            ),
            ("spans", ", ".join(map(str, self.spans)) if self.spans else "none"),
            ("parameters", f"{self.parameters:,}"),
            ("asset size", f"about {readable_bytes(self.estimated_bytes)} (estimated)"),
            (
                "model in memory",
                f"about {readable_bytes(self.estimated_peak_bytes)} at the peak (estimated: the "
                "decoder and the converted program; the Python process adds about 0.3 GB)",
            ),
        ]
        if self.state_bytes:
            total = readable_bytes(self.estimated_bytes + self.state_bytes)
            held = f"the weights and the KV cache at {self.capacity:,} tokens"
            rows.insert(-1, ("to run", f"about {total} ({held}; the runtime adds its own)"))
        rows += [("warning", warning) for warning in self.warnings]
        if self.experts is not None:
            computed = {
                "chosen": "the chosen experts only (GatherMM)",
                "all": "every expert, weighted by the router",
            }
            rows.insert(8, ("experts", computed[self.experts]))
        if self.sidecar is not None:
            tables = "int8 files beside the program" if self.sidecar else "in the graph"
            rows.insert(8, ("lookup tables", tables))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)

    def _state_size(self) -> str:
        from zoo.core.io.shown import readable_bytes

        if not self.state_bytes:
            return ""
        return f": about {readable_bytes(self.state_bytes)} at {self.capacity:,} tokens"

    def as_dict(self) -> dict:
        plan = asdict(replace(self, config=None))
        del plan["config"]
        plan.update(checkpoint=str(self.checkpoint), output=str(self.output))
        return plan


def plan_export(
    checkpoint: str | os.PathLike,
    output: str | os.PathLike,
    *,
    entry: str | None = None,
    room: bool = True,
    **options,
) -> ExportPlan:
    """Resolve and check an export of the checkpoint directory `checkpoint` to `output`;
    reads config.json (once) and the safetensors headers only (milliseconds, no weights).

    `entry` names the zoo entry (default: config.json's `model_type`). `stream`: "on"
    exports range by range (`zoo.core.export.stream`: peak memory follows the largest range),
    "off" in one piece, "auto" range by range when the whole model would not fit in half
    this machine's memory. `target="apple-engine"`: a bundle for Apple's engine
    (`zoo.core.export.apple_engine`), planned and checked alike. `room=False`: sizes only,
    the destination's free space not checked (`zoo.bench.fits`)."""
    from zoo.core.checkpoint.weights import check_expert_count, values_per_layer
    from zoo.core.export.components import check_components, plan_components
    from zoo.core.export.fit import state_bytes, stream_plan, streamable
    from zoo.core.io.files import read_json
    from zoo.core.model.entry import entry_for_config, get_entry, stores_a_head

    options = export_options(options, "plan_export()")
    first_layers = options["first_layers"]
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise FileNotFoundError(f"{checkpoint} is not a directory: pass a checkpoint directory")
    raw = read_json(checkpoint / "config.json", ": is it a checkpoint folder?")  # read once
    found = get_entry(entry) if entry else entry_for_config(raw, checkpoint)
    config = found.config.from_checkpoint(checkpoint, raw)  # refuses a bad field, by name
    if (checkpoint / "tokenizer.json").exists():  # copied into the asset: it must load
        from zoo.core.asset.tokenizer import load_tokenizer

        load_tokenizer(checkpoint / "tokenizer.json")
    layers = config.num_hidden_layers
    per_layer = values_per_layer(checkpoint, found.checkpoint_name)
    check_expert_count(config, checkpoint)  # before a dry run says the plan is fine
    if first_layers is not None:
        why_not = streamable(found, config)
        if why_not or not 1 <= first_layers < layers:
            raise ValueError(
                f"--first-layers: {why_not}"
                if why_not
                else f"--first-layers takes 1 to {layers - 1} (of {layers}), got {first_layers}"
            )
        from zoo.core.export.ranges import check_splittable

        check_splittable(found.model)
        layers = first_layers
        per_layer = {n: v for n, v in per_layer.items() if n is None or n < layers}
    if options["target"] == "apple-engine":
        from zoo.core.export.apple_engine import engine_options

        options = engine_options(options, Path(output), checkpoint)
    plan = _resolve(found, checkpoint, Path(output), layers, options, bool(config.experts()))
    plan = replace(plan, first_layers=first_layers, config=config)
    positions = getattr(config, "trained_positions", None)
    if positions and plan.capacity > positions:
        warning = (
            f"--capacity {plan.capacity} is past the {positions} positions config.json's "
            "max_position_embeddings says the model was trained for: text past them may "
            f"degrade (--capacity {positions} stays inside)"
        )
        plan = replace(plan, warnings=(*plan.warnings, warning))
    parameters = sum(per_layer.values())  # the tensors the model reads (no vision tower)
    per_weight = BYTES_PER_WEIGHT.get(plan.compress.removeprefix("gptq:"), OTHER_BYTES_PER_WEIGHT)
    stored = parameters
    if plan.weights != "linear" and not stores_a_head(checkpoint, found.checkpoint_name):
        # a tied head gets its own transposed copy in every layout but "linear"
        # (zoo.core.model.layout): SmolLM2's asset is 655 MB, not the 538 its tensors make
        stored += config.vocab_size * config.hidden_size
    plan = replace(
        plan,
        parameters=parameters,
        estimated_bytes=int(stored * per_weight),
        calibration=calibration_file(plan.compress, options["calibration"]),
    )
    if plan.calibration and not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(
            f"--calibration is read with the checkpoint's tokenizer: {checkpoint} has no "
            "tokenizer.json"
        )
    plan = replace(
        plan,
        state_bytes=state_bytes(found, config, plan.strategy, plan.capacity, plan.kv_cache, layers),
    )
    plan = stream_plan(plan, found, per_layer, options["stream"], config)
    components, left_out, extra, processors = plan_components(found, checkpoint, options)
    plan = replace(plan, components=components, left_out=left_out, processors=processors)
    plan = replace(plan, estimated_bytes=plan.estimated_bytes + extra)
    check_components(plan)
    from zoo.core.export.convert import check_room

    if room:  # before minutes of loading
        check_room(plan.output, plan.estimated_bytes + (16 << 20))
    return plan


def plan_for_model(model, output: str | os.PathLike, **options) -> ExportPlan:
    """The plan of exporting `model`, a decoder already loaded (`ModelEntry.load`): its
    strategy and capacity are the model's; `options` as `export_model`'s, and `checkpoint`
    (the directory it was loaded from, for its tokenizer files) if any."""
    from zoo.core.compression.presets import get_preset
    from zoo.core.model.entry import get_entry
    from zoo.core.model.experts import experts_stored
    from zoo.core.model.kv_cache import kv_cache_of

    checkpoint = options.pop("checkpoint", None)
    given_kv_cache = options.get("kv_cache")
    options = export_options(options, "export_model()", model=True)
    loaded_with = getattr(model, "compression", "fp32")
    compress = get_preset(options["compress"]).spelling
    if loaded_with not in ("fp32", get_preset(compress).name):
        raise ValueError(
            f"the model was loaded compressed with {loaded_with!r}: export it with "
            f"compress={loaded_with!r} (or load it again without compression)"
        )
    options.update(
        compress=compress,
        kv_cache=given_kv_cache or kv_cache_of(model),  # as loaded, unless asked otherwise
        strategy=model.strategy.name,
        capacity=model.capacity,
        sidecar="auto",
        target="zoo",
        model_id=None,
    )
    return _resolve(
        get_entry(model.name),
        Path(checkpoint) if checkpoint is not None else None,
        Path(output),
        len(model.layers),
        options,
        experts_stored(model) is not None,
    )


def _resolve(
    entry, checkpoint: Path | None, output: Path, layers: int, options: dict, has_experts: bool
) -> ExportPlan:
    """Every check of an export's options (`export_options`' keywords), in one place."""
    from zoo.core.asset.kv_writes import get_strategy
    from zoo.core.compression.encoding import check_encoding
    from zoo.core.compression.presets import get_preset
    from zoo.core.export.convert import check_destination
    from zoo.core.model.layout import auto_experts, default_chunk, resolve_layout

    capacity, chunk, score_chunk = options["capacity"], options["chunk"], options["score_chunk"]
    spans, kv_cache, sidecar = options["spans"], options["kv_cache"], options["sidecar"]
    experts, verify_widths = options["experts"], options["verify_widths"]
    engine = options["target"] == "apple-engine"
    if not engine:  # a bundle: its folder and its KV writes are the contract's (engine_options)
        check_destination(output, options["overwrite"], checkpoint)
        get_strategy(options["strategy"]).check_serves(entry.title)
    check_capacity(capacity)
    chunk = min(default_chunk(), capacity) if chunk is None else chunk
    if isinstance(chunk, int) and chunk > capacity:
        raise ValueError(f"--chunk {chunk} is longer than --capacity {capacity}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 2 <= chunk <= capacity:
        raise ValueError(
            f"the prefill chunk (--chunk) must hold 2 to {capacity} tokens (the capacity), "
            f"got {chunk!r}"
        )
    if score_chunk is not None and not 1 <= score_chunk <= capacity:
        raise ValueError(
            f"--verify {score_chunk} (the widest verify width, score_chunk in Python) must "
            f"hold 1 to {capacity} tokens, the capacity: choose a width within it"
        )
    check_verify_widths(verify_widths, score_chunk)
    check_spans(spans, chunk, capacity)
    if kv_cache not in KV_CACHES:
        raise ValueError(f"--kv-cache is one of {list(KV_CACHES)}, got {kv_cache!r}")
    preset = get_preset(options["compress"])
    preset.check(entry.name)
    check_encoding(options["encoding"], preset, engine)
    ranges = None
    if options["layers_per_function"] is not None:
        from zoo.core.export.ranges import check_splittable, split_layers

        check_splittable(entry.model)
        ranges = tuple(tuple(r) for r in split_layers(layers, options["layers_per_function"]))
    layout = preset.layout(resolve_layout(options["weights"], options["keys"]))
    if sidecar not in ("auto", "on", "off"):
        raise ValueError(f"--sidecar is auto, on or off, got {sidecar!r}")
    wants_sidecar = preset.compresses_weights if sidecar == "auto" else sidecar == "on"
    if experts not in ("auto", "chosen", "all"):
        raise ValueError(f"--experts is auto, chosen or all, got {experts!r}")
    if experts != "auto" and not has_experts:
        raise ValueError(f"--experts {experts}: this checkpoint has no experts; leave it out")
    if experts == "auto":
        experts = auto_experts(layout["weights"])
    return ExportPlan(
        entry=entry.name,
        checkpoint=checkpoint,
        output=output,
        strategy=options["strategy"],
        capacity=capacity,
        chunk=chunk,
        compress=preset.spelling,
        weights=layout["weights"],
        keys=layout["keys"],
        layers=layers,
        kv_cache=kv_cache,
        encoding=options["encoding"],
        ranges=ranges,
        spans=tuple(spans) if spans else None,
        sidecar=wants_sidecar if entry.sidecar_option else None,
        experts=experts if has_experts else None,
        score_chunk=score_chunk,
        verify_widths=tuple(sorted(set(verify_widths))) if verify_widths else None,
        overwrite=options["overwrite"],
        target=options["target"],
        model_id=options["model_id"],
    )


plan_export.__doc__ += keywords_doc()
