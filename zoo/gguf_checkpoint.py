"""A GGUF file -> a transformers checkpoint folder (float32 safetensors, config, tokenizer,
chat template), tensor by tensor: each tensor is dequantized by transformers' own GGUF
reader and processor (names, Llama's q/k permutation), written into the shard being filled,
and let go, so memory follows the largest shard, not the model (a 20B GGUF converted whole
to float32 would need 80 GB). Shards of at most `SHARD_BYTES`, with their index when there
is more than one; one shard is `model.safetensors`, as `save_pretrained` writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

SHARD_BYTES = 2_000_000_000


class GGUFError(RuntimeError):
    """The GGUF file cannot be converted: the message says what to do."""


def convert_gguf(gguf: Path, directory: Path, shard_bytes: int = SHARD_BYTES) -> None:
    """Write `gguf` as a checkpoint into `directory` (made if missing)."""
    try:
        import gguf as gguf_package
        import numpy as np
        import torch
        import transformers
        from transformers import modeling_gguf_pytorch_utils as reader
    except ImportError as error:
        raise GGUFError(
            f"converting a GGUF file needs transformers and gguf ({error}): pip install '.[fetch]'"
        ) from None
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    with open(gguf, "rb") as file:
        magic = file.read(4)
    if magic != b"GGUF":
        raise GGUFError(
            f"{gguf.name} is not a GGUF file (it starts with {magic!r}, not b'GGUF'): name a "
            ".gguf file, or download it again"
        )
    directory.mkdir(parents=True, exist_ok=True)
    writer = ShardWriter(directory, shard_bytes)
    try:
        parsed = reader.load_gguf_checkpoint(str(gguf))  # the metadata only
        config = transformers.AutoConfig.for_model(**parsed["config"])
        with torch.device("meta"):  # only to name the tensors: nothing allocated
            skeleton = transformers.AutoModelForCausalLM.from_config(config)
        processor = reader.TENSOR_PROCESSORS.get(
            parsed["config"].get("model_type"), reader.TensorProcessor
        )(config=parsed["config"])
        names = reader.get_gguf_hf_weights_map(skeleton, processor)
        held = {"config": parsed["config"], "tensors": {}}  # where a processor may park tensors
        for tensor in gguf_package.GGUFReader(str(gguf)).tensors:
            weights = gguf_package.dequantize(tensor.data, tensor.tensor_type)
            result = processor.process(
                weights=weights, name=tensor.name, tensor_key_mapping=names, parsed_parameters=held
            )
            if result.name in names:
                writer.add(names[result.name], torch.from_numpy(np.copy(result.weights)).float())
            for name in list(held["tensors"]):  # what the processor put aside itself
                writer.add(name, held["tensors"].pop(name).float())
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, MemoryError) as error:
        # numpy's words ("cannot reshape array of size ...") from a damaged file, or
        # transformers' for an architecture or tensor type it does not convert
        unsupported = "not supported" in str(error) or "Unrecognized" in str(error)
        hint = (
            "transformers' GGUF reader does not convert it: use a safetensors checkpoint"
            if unsupported
            else "the file is damaged or cut short: download it again"
        )
        raise GGUFError(f"{gguf.name}: {hint} ({type(error).__name__}: {error})") from None
    expected = set(skeleton.state_dict())
    missing = sorted(expected - set(writer.names))
    if config.tie_word_embeddings:
        missing = [name for name in missing if not name.startswith("lm_head.")]
    unexpected = sorted(set(writer.names) - expected)
    if missing or unexpected:
        raise GGUFError(
            f"{gguf.name}: not a whole {parsed['config'].get('model_type')} model (tensors "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}): download it again, or use "
            "a safetensors checkpoint"
        )
    writer.close()
    config.architectures = [type(skeleton).__name__]  # as save_pretrained records them
    config.dtype = torch.float32
    config.save_pretrained(directory)
    if skeleton.can_generate():
        transformers.GenerationConfig.from_model_config(config).save_pretrained(directory)
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        gguf.parent, gguf_file=gguf.name, local_files_only=True
    )
    tokenizer.save_pretrained(directory)


class ShardWriter:
    """Tensors written into safetensors shards of at most `limit` bytes as they come; the
    index (`model.safetensors.index.json`) when there is more than one shard."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory, self.limit = directory, limit
        self.pending: dict = {}
        self.pending_bytes = 0
        self.files: list[tuple[Path, list[str]]] = []
        self.names: list[str] = []

    def add(self, name: str, tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.limit:
            self._flush()
        self.pending[name] = tensor.contiguous()
        self.pending_bytes += size
        self.names.append(name)

    def _flush(self) -> None:
        from safetensors.torch import save_file

        path = self.directory / f"shard-{len(self.files) + 1:05d}.safetensors"
        save_file(self.pending, path, metadata={"format": "pt"})
        self.files.append((path, list(self.pending)))
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> None:
        if self.pending:
            self._flush()
        if len(self.files) == 1:  # one shard: the name save_pretrained gives it
            self.files[0][0].rename(self.directory / "model.safetensors")
            return
        count = len(self.files)
        weight_map = {}
        for number, (path, names) in enumerate(self.files, 1):
            final = path.with_name(f"model-{number:05d}-of-{count:05d}.safetensors")
            path.rename(final)
            weight_map.update(dict.fromkeys(names, final.name))
        index = {"metadata": {}, "weight_map": weight_map}
        (self.directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
