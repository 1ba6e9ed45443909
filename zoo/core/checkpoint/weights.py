"""A checkpoint's tensors, read with safetensors (never pickle): which files hold them,
whether they fit the model a config builds, and the model built and loaded module by module.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from zoo.core.checkpoint import mxfp4
from zoo.core.checkpoint.config import CheckpointError
from zoo.core.io.files import inside, read_json

# what `build_and_load` calls on each module as it is read (e.g. to compress it)
Loaded = Callable[[str, torch.nn.Module], torch.nn.Module]


def safetensors_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory: pass a checkpoint directory")
    index = directory / "model.safetensors.index.json"
    if index.exists():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: no weight_map object; fix or re-download it")
        shards = [
            inside(directory, shard, index.name)
            for shard in sorted(set(weight_map.values()), key=str)
        ]
        missing = [p.name for p in shards if not p.exists()]
        if missing:
            raise FileNotFoundError(f"{index} names shards that are not there: {missing}")
        return shards
    files = sorted(directory.glob("*.safetensors"))  # (regular files: _open_safetensors)
    if not files:
        pickles = sorted(p.name for p in directory.glob("*.bin")) + sorted(
            p.name for p in directory.glob("*.pt")
        )
        hint = (
            f" (found {pickles}: pickle checkpoints are not loaded, convert them to safetensors)"
            if pickles
            else ""
        )
        raise FileNotFoundError(f"no *.safetensors in {directory}{hint}")
    return files


@contextlib.contextmanager
def _open_safetensors(path: Path):
    _check_regular(path)
    try:
        with safe_open(str(path), framework="pt") as tensors:
            yield tensors
    except CheckpointError:  # a tensor's own refusal (NaN, an integer dtype): as it is
        raise
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not a readable safetensors file ({error})") from None


def _check_regular(path: Path) -> None:
    if not path.is_file():  # a directory, a device or a FIFO (which would hang the reader)
        raise CheckpointError(f"{path} is not a regular file; put the safetensors file there")


# a safetensors header is a little-endian u64 length, then that many bytes of JSON
HEADER_LIMIT = 100_000_000


def tensor_headers(directory: str | Path) -> Iterator[tuple[Path, str, tuple[int, ...]]]:
    """(file, key, shape) of every tensor of the checkpoint, read from the safetensors
    headers alone: no mapping of the file (a shard larger than memory is described too)."""
    for path in safetensors_files(directory):
        _check_regular(path)
        try:
            with open(path, "rb") as file:
                length = int.from_bytes(file.read(8), "little")
                if not 2 <= length <= min(HEADER_LIMIT, path.stat().st_size - 8):
                    raise ValueError(f"a header of {length:,} bytes")
                header = json.loads(file.read(length))
            described = {
                key: tuple(int(n) for n in entry["shape"])
                for key, entry in header.items()
                if key != "__metadata__"
            }
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise CheckpointError(
                f"{path}: not a readable safetensors file ({error}); fix or re-download it"
            ) from None
        for key, shape in described.items():
            yield path, key, shape


def _listed(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown


def _targets(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    targets = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return {name: t for name, t in targets.items() if name in module.state_dict()}


def check_tensors(
    module: torch.nn.Module,
    directory: str | Path,
    rename: Callable[[str], str | None],
    ignore: Iterable[str] = (),
) -> dict[str, tuple[Path, str]]:
    """Compare the checkpoint's tensor names and shapes (read from the safetensors headers,
    no tensor loaded) with `module`'s (which may live on the meta device: nothing built).

    Returns our name -> (file, checkpoint key). Missing, unexpected and misshaped tensors
    are all reported at once, shortened past a few of each.
    """
    targets = _targets(module)
    ignore = tuple(ignore)
    found: dict[str, tuple[Path, str]] = {}
    unexpected, misshaped = [], []
    for path, key, shape in tensor_headers(directory):
        packed = mxfp4.packed_name(key)  # MXFP4 `_blocks`: read with its `_scales`
        name = rename(packed or key)
        if name is None or any(name.startswith(prefix) for prefix in ignore):
            continue
        if name not in targets:
            if not (key.endswith(mxfp4.SCALES) and rename(mxfp4.weight_of(key))):
                unexpected.append(key)
            continue
        if packed and len(shape) == 4:
            shape = mxfp4.dequantized_shape(shape)
        if shape != tuple(targets[name].shape):
            misshaped.append(f"{key} {shape}, expected {tuple(targets[name].shape)}")
        if name in found and found[name][0] != path:
            raise CheckpointError(
                f"{directory}: {key} is in both {found[name][0].name} and {path.name} "
                "and no model.safetensors.index.json says which; remove one"
            )
        found[name] = (path, key)
    missing = sorted(set(targets) - set(found))
    problems = []
    if missing:
        problems.append(f"missing tensors: {_listed(missing)}")
    if misshaped:
        problems.append(f"tensors of the wrong shape: {_listed(misshaped)}")
    if unexpected:
        problems.append(f"tensors this model has no place for: {_listed(sorted(unexpected))}")
    if problems:
        raise CheckpointError(
            f"{directory}: " + "; ".join(problems) + ". Does config.json belong to these weights?"
        )
    return found


def stored_layers(directory: str | Path, rename: Callable[[str], str | None]) -> set[int]:
    """The decoder layer numbers the checkpoint holds tensors of (`layers.N.`, our names),
    from the safetensors headers: a config.json that does not match is refused before a
    model of its size is built."""
    return {layer for layer in values_per_layer(directory, rename) if layer is not None}


def layer_of(name: str) -> int | None:
    """The decoder layer a tensor (our name, `layers.N.…`) belongs to; None: outside them."""
    import re

    match = re.match(r"layers\.(\d+)\.", name)
    return int(match[1]) if match else None


def values_per_layer(
    directory: str | Path, rename: Callable[[str], str | None]
) -> dict[int | None, int]:
    """How many values the checkpoint's tensors hold per decoder layer (None: the rest,
    embeddings, final norm and head), from the safetensors headers."""

    counts: dict[int | None, int] = {}
    for _, key, shape in tensor_headers(directory):
        name = rename(mxfp4.weight_of(key))
        if name is not None:
            layer = layer_of(name)
            counts[layer] = counts.get(layer, 0) + mxfp4.stored_values(key, shape)
    return counts


def find_tensor(
    directory: str | Path, rename: Callable[[str], str | None], name: str
) -> tuple[Path, str]:
    """(file, checkpoint key) of our tensor `name`, from the safetensors headers."""
    for path, key, _ in tensor_headers(directory):
        if rename(key) == name:
            return path, key
    raise CheckpointError(f"{directory}: no tensor {name} in its safetensors files")


@contextlib.contextmanager
def parameters_on_meta(keep_below: int = 0):
    """Build modules whose parameters live on the meta device (no memory, no init time)
    while their buffers are real (computed in `__init__`: RoPE frequencies, scalars), and
    so are parameters of fewer than `keep_below` values."""
    register = torch.nn.Module.register_parameter

    def register_on_meta(self, name, param):
        if param is not None and param.device.type != "meta" and param.numel() >= keep_below:
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(self, name, param)

    torch.nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def build_and_load(
    build: Callable[[], torch.nn.Module],
    directory: str | Path,
    rename: Callable[[str], str | None],
    ignore: Iterable[str] = (),
    loaded: Loaded | None = None,
    only: Callable[[str], bool] | None = None,
) -> torch.nn.Module:
    """`build()` the model with its parameters on the meta device, check that the
    checkpoint's tensors fit (names and shapes from the safetensors headers: a config that
    does not match the weights fails in a second), then read the tensors one module at a
    time, each in its stored dtype (bf16 in a released checkpoint) converted to the
    parameter's dtype only when it is read.

    `loaded(name, module)` sees each module as soon as its own tensors are in and returns
    what to keep in its place (e.g. the module compressed, `zoo.core.compression.presets`): so a
    whole-model float32 copy never exists, only one module's.

    `only(name)` (our names), if given, picks the tensors to read: the others stay on the
    meta device (an export range by range, `zoo.core.export.stream`; `drop_unread` before it)."""
    with parameters_on_meta():
        model = build()
    found = check_tensors(model, directory, rename, ignore)
    owned: dict[str, list[str]] = {}
    for name in found:
        if only is None or only(name):
            owned.setdefault(name.rpartition(".")[0], []).append(name)
    with torch.no_grad():
        for owner, module in list(model.named_modules()):
            # each module's files opened and closed again: safetensors maps a file and the
            # pages read stay in this process's memory while it is open (1.2 GB for a
            # bf16 201k-row table); closed, they leave
            with contextlib.ExitStack() as files:
                handles: dict[Path, object] = {}
                for name in owned.get(owner, ()):
                    path, key = found[name]
                    if path not in handles:
                        handles[path] = files.enter_context(_open_safetensors(path))
                    try:
                        tensor = _read(handles[path], key, directory, rename)
                        _assign(module, name.rpartition(".")[2], tensor)
                    except CheckpointError as error:
                        raise CheckpointError(f"{path}: {key} {error}") from None
            if loaded is not None and owner in owned:
                replace_module(model, owner, loaded(owner, module))
    left = [
        name
        for name, p in model.named_parameters()
        if p.device.type == "meta" and (only is None or only(name))
    ]
    if left:
        raise CheckpointError(f"{directory}: no tensors were read for {_listed(left)}")
    return model


def _read(tensors, key: str, directory: str | Path, rename) -> torch.Tensor:
    """A checkpoint tensor; MXFP4 blocks dequantized with their scales
    (`zoo.core.checkpoint.mxfp4`)."""
    if not mxfp4.packed_name(key):
        return tensors.get_tensor(key)
    scales = mxfp4.weight_of(key) + mxfp4.SCALES
    if scales in tensors.keys():  # noqa: SIM118 - safe_open is not a Mapping
        scale_values = tensors.get_tensor(scales)
    else:  # in another shard
        path, _ = find_tensor(directory, lambda k: k if k == scales else None, scales)
        with _open_safetensors(path) as other:
            scale_values = other.get_tensor(scales)
    try:
        return mxfp4.dequantize(tensors.get_tensor(key), scale_values)
    except ValueError as error:
        raise CheckpointError(f"({error})") from None


def drop_unread(model: torch.nn.Module) -> None:
    """Remove the parameters left on the meta device (those `build_and_load(only=...)` did
    not read): torch.export then sees only the weights a range computes with."""
    for module in model.modules():
        for name in [n for n, p in module._parameters.items() if p is not None and p.is_meta]:
            del module._parameters[name]


def replace_module(model: torch.nn.Module, name: str, module: torch.nn.Module) -> None:
    """Put `module` at `name` ("layers.3.mlp.up_proj") in `model` (no-op if already there)."""
    parent, _, leaf = name.rpartition(".")
    owner = model.get_submodule(parent) if parent else model
    if getattr(owner, leaf) is not module:
        setattr(owner, leaf, module)


def _assign(module: torch.nn.Module, leaf: str, tensor: torch.Tensor) -> None:
    """Put a checkpoint tensor in place of a (meta) parameter, or into a buffer."""
    target = module._parameters.get(leaf, module._buffers.get(leaf))
    if target is not None and target.is_floating_point() and not tensor.is_floating_point():
        raise CheckpointError(
            f"is stored as {tensor.dtype}, not as floating-point weights ({leaf}): a "
            "quantized or damaged checkpoint; dequantize it to bf16, fp16 or fp32 first"
        )
    if tensor.is_floating_point():  # clip bounds may be infinite (a linear left unclipped)
        bounds = leaf in getattr(module, "MAY_BE_INFINITE", ())
        damaged = torch.isnan(tensor) if bounds else ~torch.isfinite(tensor)
        if bool(damaged.any()):
            raise CheckpointError(f"has NaN or infinite values: the checkpoint is damaged ({leaf})")
    if leaf in module._parameters:
        target = module._parameters[leaf]
        module._parameters[leaf] = torch.nn.Parameter(
            tensor.to(target.dtype), requires_grad=target.requires_grad
        )
    else:
        module._buffers[leaf].copy_(tensor.to(module._buffers[leaf].dtype))


def weight_count(directory: str | Path) -> int:
    """How many values the checkpoint's tensors hold, from the safetensors headers."""

    return sum(mxfp4.stored_values(key, shape) for _, key, shape in tensor_headers(directory))


def stored_expert_count(directory: str | Path) -> int | None:
    """How many experts a layer of the checkpoint holds, from the safetensors headers
    (`...experts.N....` one module an expert, or the first axis of a stacked `...experts.X`);
    None: no experts."""
    import re

    count = None
    for _, key, shape in tensor_headers(directory):
        numbered = re.search(r"\.experts\.(\d+)\.", key)
        if numbered:
            count = max(count or 0, int(numbered[1]) + 1)
        elif ".experts." in key and shape:
            count = max(count or 0, shape[0])
    return count


def check_expert_count(config, directory: str | Path) -> None:
    """A config.json whose expert count the weights do not hold is refused from the headers,
    before a model of its size is built (a million experts took minutes to build)."""
    name = next((n for n in ("num_experts", "num_local_experts") if getattr(config, n, None)), "")
    said = getattr(config, name, None) if name else None
    if not said:
        return
    stored = stored_expert_count(directory)
    if stored is not None and stored != said:
        spelled = " or ".join(dict.fromkeys([name, *getattr(config, "RESAVED_AS", {}).values()]))
        raise CheckpointError(
            f"{directory}/config.json says {said:,} experts a layer ({spelled}), the weights "
            f"hold {stored:,}. Does config.json belong to these weights?"
        )
