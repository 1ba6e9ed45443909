"""Zoo entries: what makes a decoder a zoo model, registered once per model package.

A model package holds a config dataclass (`config.py`, reading config.json through
`zoo.core.checkpoint.config.DecoderConfig`), the decoder (`model.py`, one file read top to bottom)
and one `register(ModelEntry(...))` in its `__init__.py`. Everything else (loading a
checkpoint directory, export, the command line, tiny checkpoints for the tests and recipes,
the transformers reference, the bench) is generic and looks the entry up by name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from zoo.core.asset.sidecar import SidecarSource
from zoo.core.checkpoint.config import CheckpointError
from zoo.core.checkpoint.weights import (
    build_and_load,
    check_expert_count,
    find_tensor,
    stored_layers,
)
from zoo.core.model.contract import Decoder, members
from zoo.core.model.experts import is_expert_projection, stack_experts

# Where transformers puts a text decoder's tensors: the multimodal layouts (transformers 5,
# then Gemma 3's as released and as transformers still writes it), then text-only.
TEXT_PREFIXES = ("model.language_model.", "language_model.model.", "model.")


INPUTS = {"vision": "images", "audio": "audio"}  # what an encoder component reads


@dataclass(frozen=True)
class TinyCheckpoint:
    """How the tests build a random-weight checkpoint of an entry with transformers: the
    text config, named variants of it (the first is the default), the other configs of the
    multimodal layout (a small vision tower), and parameter names to jitter (ones
    transformers initialises to constants)."""

    text: dict
    variants: dict[str, dict] = field(default_factory=lambda: {"default": {}})
    towers: dict = field(default_factory=dict)  # e.g. {"vision_config": {...}}
    jitter: tuple[str, ...] = ()
    # a checkpoint that reads images (`make_tiny_checkpoint(images=True)`): the image
    # processor's settings, the special tokens (id -> text) and a chat template
    images: dict = field(default_factory=dict)
    # one that hears audio (`audio=True`): the audio tower's config, its token ids, the
    # feature extractor's settings, the token budget, the special tokens
    audio: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ModelEntry:
    name: str  # the package (`zoo.NAME`), the CLI, the `model` of an asset's DecodeSpec
    title: str  # "Gemma 4": how pages and messages name it
    config: type  # a DecoderConfig dataclass
    model: Callable[..., nn.Module]  # (config, strategy, capacity, **options) -> decoder
    # the transformers classes of the reference: `{name}TextConfig` (text-only, loaded
    # through AutoModelForCausalLM), `{name}Config` + `{name}ForConditionalGeneration`;
    # a family without a multimodal layout (`text_only`) has only `{name}Config`
    transformers_name: str
    tiny: TinyCheckpoint
    text_only: bool = False
    towers: tuple[str, ...] = ()  # checkpoint names (after the prefix) of other modalities
    # component -> the module that reads that encoder ("vision", "audio";
    # zoo.core.export.components)
    encoders: dict = field(default_factory=dict)
    # the load option that keeps lookup tables out of the graph (`--sidecar`), if any
    sidecar_option: str | None = None
    # our names a checkpoint may carry that the decoder does not use (beyond a tied head)
    unused_weights: Callable[[object], list[str]] = lambda config: []

    @property
    def inputs(self) -> str:
        """What the entry's models read: text, and what each encoder reads."""
        return ", ".join(["text", *(INPUTS[name] for name in self.encoders)])

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint_name(self, key: str) -> str | None:
        """Our parameter name for a checkpoint tensor, or None to skip it (vision or audio
        towers, multi-token-prediction heads)."""
        if key in ("lm_head.weight", "language_model.lm_head.weight"):
            return "lm_head.weight"
        for prefix in TEXT_PREFIXES:
            if key.startswith(prefix):
                name = key[len(prefix) :]
                return None if name.startswith(self.towers) else name
        return None

    def load(
        self,
        directory: str | Path,
        strategy="runtime-index",
        capacity: int = 256,
        compress: str = "fp32",
        progress: Callable[[str], None] | None = None,
        only: Callable[[str], bool] | None = None,
        experts: str | None = None,
        calibration: list[list[int]] | None = None,
        config=None,
        **options,
    ) -> nn.Module:
        """A ready-to-export decoder (eval mode, float32) with the checkpoint's weights.

        Tensors are read module by module in their stored dtype; with a `compress` preset
        that compresses weights (`zoo.core.compression.presets`), each module is compressed as soon
        as it is read and its weights memory-mapped from a temporary directory the model holds
        (`model.weight_store`): loading a bf16 checkpoint never makes a whole-model float32
        copy. Export such a model with the same `compress`. `progress`, if given, is told
        every quarter of the decoder layers read. `only(name)`, if given, picks the tensors
        read (one layer range of an export larger than memory, `zoo.core.export.stream`); the
        others stay on the meta device. `experts="chosen"` stacks experts published one
        module per expert as they are read, and a compressing preset compresses the stacks
        (`zoo.core.model.experts.stack_experts`), so GatherMM reads compressed codes. A calibrated
        preset (`gptq:...`) loads float32, runs the `calibration` windows of token ids and
        compresses with GPTQ's codes (`zoo.core.compression.gptq`). `config`: the checkpoint's
        config as a plan already read it (`ExportPlan.config`), else read here."""
        import copy
        import tempfile

        from zoo.core.asset.decode_spec import check_capacity
        from zoo.core.asset.kv_writes import get_strategy
        from zoo.core.compression.presets import get_preset

        preset = get_preset(compress)
        preset.check(self.name)
        preset.check_calibration(calibration)

        # a copy of the plan's: a model may settle its config's fields as it builds
        config = copy.deepcopy(config) if config else self.config.from_checkpoint(directory)
        check_capacity(capacity)
        layers = stored_layers(directory, self.checkpoint_name)
        if layers and layers != set(range(config.num_hidden_layers)):
            raise CheckpointError(
                f"{directory}/config.json says num_hidden_layers={config.num_hidden_layers}, "
                f"the weights hold {len(layers)} layers ({min(layers)} to {max(layers)}). "
                "Does config.json belong to these weights?"
            )
        check_expert_count(config, directory)
        strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy

        def build() -> nn.Module:
            return self.model(config, strategy, capacity, **options)

        if config.tie_word_embeddings and stores_a_head(directory, self.checkpoint_name):
            # config.json says tied, the checkpoint holds a head of its own: transformers 5
            # computes with the stored head, so the zoo does too
            config.tie_word_embeddings = False
        ignored = list(self.unused_weights(config))
        if config.tie_word_embeddings:
            ignored.append("lm_head.")
        with torch.device("meta"):  # which tables stay out of the graph (zoo.core.asset.sidecar)
            skeleton = build()
        sidecars = {n: skeleton.SIDECAR_WEIGHTS[n] for n in getattr(skeleton, "sidecar_inputs", {})}
        preset.check_units(skeleton)  # before the weights are read
        del skeleton
        ignored += list(sidecars.values())
        loaded, store = None, None
        if preset.compresses_weights:
            store = tempfile.TemporaryDirectory(prefix="zoo-weights-")
        if preset.compresses_weights and not preset.calibrated:
            layers, step, told = (
                config.num_hidden_layers,
                max(1, config.num_hidden_layers // 4),
                set(),
            )

            def loaded(name: str, module: nn.Module) -> nn.Module:
                index = name.split(".")[1] if name.startswith("layers.") else None
                if progress and index and int(index) % step == 0 and index not in told:
                    told.add(index)
                    progress(f"{compress}: reading layer {int(index) + 1} of {layers}")
                if experts == "chosen" and is_expert_projection(name):
                    return module  # compressed once stacked, below
                return preset.compress_module(name, module, store.name)

        model = build_and_load(build, directory, self.checkpoint_name, ignored, loaded, only)
        if experts == "chosen":
            stack_experts(
                model, store and functools.partial(preset.compress_module, store=store.name)
            )
        if preset.calibrated:
            from zoo.core.compression.gptq import calibrate
            from zoo.core.model.eager import torch_logits

            pieces = [
                ids[i : i + capacity] for ids in calibration for i in range(0, len(ids), capacity)
            ]
            model.calibration = calibrate(
                model.eval(), pieces, preset, torch_logits, progress, store.name
            )
        model.compression, model.weight_store = preset.name, store
        for name, weight in sidecars.items():  # read from the checkpoint when exported
            file, key = find_tensor(directory, self.checkpoint_name, weight)
            model.sidecars[name] = SidecarSource(file.resolve(), key)
        return model.eval()

    def build(self, config: dict, strategy: str, capacity: int, **options) -> nn.Module:
        """The decoder of a config given as a dict of config.json fields (random init)."""
        from zoo.core.asset.kv_writes import get_strategy

        return self.model(self.config(**config), get_strategy(strategy), capacity, **options)

    @property
    def multimodal_class(self) -> str | None:
        return None if self.text_only else f"{self.transformers_name}ForConditionalGeneration"

    @property
    def text_config_class(self) -> str:
        suffix = "Config" if self.text_only else "TextConfig"
        return f"{self.transformers_name}{suffix}"


def stores_a_head(directory: str | Path, rename: Callable[[str], str | None]) -> bool:
    """Whether the checkpoint holds a head of its own (`lm_head.weight`, our name)."""
    try:
        find_tensor(directory, rename, "lm_head.weight")
    except CheckpointError:
        return False
    return True


# The model contract (`zoo.core.model.contract.Decoder`): checked at registration on the entry's
# tiny config, built on the meta device (no memory, milliseconds).
CONTRACT_ATTRIBUTES = {
    name: why for name, why in members(Decoder).items() if name not in ("forward", "state_shapes")
}
CONTRACT_FORWARD = tuple(inspect.signature(Decoder.forward).parameters)[1:]


def check_contract(entry: ModelEntry) -> None:
    """Refuse an entry whose decoder breaks the contract, naming what is missing:
    `forward(input_ids, positions, step, states, last_row_only=False) -> logits` and
    `state_shapes() -> {state name: shape}` beside `CONTRACT_ATTRIBUTES`."""
    from zoo.core.asset.kv_writes import get_strategy

    with torch.device("meta"):
        config = entry.config.from_dict({"model_type": entry.config.TEXT_TYPE, **entry.tiny.text})
        model = entry.model(config, get_strategy("runtime-index"), 16)
    problems = [
        f"no `{name}` ({why})"
        for name, why in CONTRACT_ATTRIBUTES.items()
        if not hasattr(model, name)
    ]
    if getattr(model, "name", entry.name) != entry.name:
        problems.append(f"`name` is {model.name!r}, the entry is {entry.name!r}")
    head = getattr(model, "lm_head", None)
    if head is not None and not isinstance(head, nn.Linear):
        problems.append("`lm_head` is neither an nn.Linear nor None")
    parameters = list(inspect.signature(model.forward).parameters)
    # called positionally (zoo.core.export.functions.FlatDecoder), `last_row_only` by name
    if len(parameters) < len(CONTRACT_FORWARD) or "last_row_only" not in parameters:
        problems.append(f"forward{tuple(parameters)} does not take {CONTRACT_FORWARD}")
    shapes = model.state_shapes() if callable(getattr(model, "state_shapes", None)) else None
    if not isinstance(shapes, dict) or not all(
        isinstance(name, str) and all(isinstance(n, int) for n in shape)
        for name, shape in shapes.items()
    ):
        problems.append("no `state_shapes()` returning {state name: shape}")
    if problems:
        raise TypeError(
            f"zoo entry {entry.name!r} breaks the model contract: " + "; ".join(problems)
        )


ENTRIES: dict[str, ModelEntry] = {}


def register(entry: ModelEntry) -> ModelEntry:
    """Add a zoo entry, checked against the model contract (`check_contract`)."""
    check_contract(entry)
    ENTRIES[entry.name] = entry
    return entry


def get_entry(name: str) -> ModelEntry:
    """The entry of `zoo.NAME` (importing the package registers it)."""
    import importlib

    if name not in ENTRIES:
        try:
            importlib.import_module(f"zoo.{name}")
        except ModuleNotFoundError:
            pass
    if name not in ENTRIES:
        raise ValueError(f"no zoo model {name!r}; the zoo has {list(all_entries())}")
    return ENTRIES[name]


def entry_for_checkpoint(directory: str | Path) -> ModelEntry:
    """The zoo entry that loads a checkpoint directory, by its config.json `model_type` (as
    `mlx_lm.convert` and Apple's `coreai.llm.export` pick the family)."""
    from zoo.core.io.files import read_json

    config = read_json(Path(directory) / "config.json", ": is it a checkpoint folder?")
    return entry_for_config(config, directory)


def entry_for_config(config: dict, directory: str | Path) -> ModelEntry:
    """`entry_for_checkpoint` of a config.json already read (`config`, from `directory`)."""
    model_type = config.get("model_type")
    by_type = {
        kind: entry
        for entry in all_entries().values()
        for kind in entry.config.model_types()
        if kind
    }
    if not isinstance(model_type, str) or model_type not in by_type:
        known = ", ".join(f"{t} (zoo.{e.name})" for t, e in sorted(by_type.items()))
        raise ValueError(
            f"{directory}/config.json has model_type {model_type!r}, which no zoo entry "
            f"loads; the entries load: {known}"
        )
    return by_type[model_type]


def load(directory: str | Path, strategy: str = "runtime-index", capacity: int = 256, **options):
    """A decoder with the weights of a checkpoint folder, its entry picked from config.json's
    `model_type` (`ModelEntry.load` takes the same options)."""
    return entry_for_checkpoint(directory).load(directory, strategy, capacity, **options)


def all_entries() -> dict[str, ModelEntry]:
    """Every zoo model: each package under `zoo/` with a `model.py` registers itself on
    import, so a new model needs no list to be edited."""
    import importlib
    import pkgutil

    packages = Path(__file__).resolve().parents[2]  # zoo/: the floor above, not imported
    for module in pkgutil.iter_modules([str(packages)]):
        if module.ispkg and (Path(module.module_finder.path) / module.name / "model.py").exists():
            importlib.import_module(f"zoo.{module.name}")
    return dict(sorted(ENTRIES.items()))
