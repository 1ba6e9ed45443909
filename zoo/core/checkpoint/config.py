"""Read a Hugging Face checkpoint directory: its configs as transformers reads them, and its
tensors with safetensors (never pickle)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from pathlib import Path
from types import UnionType
from typing import ClassVar, Union

from zoo.core.io.files import UnsupportedConfig, read_json


class CheckpointError(ValueError):
    """The checkpoint's tensors do not fit the model: the message lists what and where."""


def refuse_cache_past(limit: int | None, capacity: int, field: str, why: str) -> None:
    """Refuse a KV cache of more than `limit` tokens (None: no limit): past `limit` the
    model computes something the entry does not (a sliding window, longrope's long
    factors), within it exactly what the entry computes."""
    if limit is not None and capacity > limit:
        raise UnsupportedConfig(
            f"{field}={limit} is smaller than the KV cache ({capacity} tokens): {why}; "
            f"export with --capacity {limit} or less"
        )


@dataclass
class CheckpointConfig:
    """config.json as transformers reads it for a text decoder.

    `text` holds the decoder's fields (nested under `text_config` in the multimodal
    layouts); `top` the top-level object; `generation` generation_config.json (or {}).
    """

    text: dict
    top: dict
    generation: dict
    multimodal: bool

    def tie_word_embeddings(self, text_default: bool, multimodal_default: bool) -> bool:
        """Whether the LM head is the embedding, decided as transformers decides it: by the
        config of the class that is loaded (the top level for the multimodal layouts)."""
        if self.multimodal:
            return bool(self.top.get("tie_word_embeddings", multimodal_default))
        return bool(self.text.get("tie_word_embeddings", text_default))

    def stop_token_ids(self, text_default: int | list[int] | None) -> list[int]:
        """End-of-sequence ids from generation_config.json, the top level and the text
        config, in that order, without repeats (a chat model's end-of-turn id included)."""
        found: list[int] = []
        for value in (
            self.generation.get("eos_token_id"),
            self.top.get("eos_token_id") if self.multimodal else None,
            self.text.get("eos_token_id", text_default),
        ):
            for token in value if isinstance(value, list) else [value]:
                if token is None:
                    continue
                if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                    raise ValueError(f"eos_token_id {token!r} is not a token id")
                if token not in found:
                    found.append(token)
        return found


def split_config(
    raw: dict,
    text_types: tuple[str, ...],
    multimodal_type: str | None,
    family: str,
    refused: dict[str, str],
) -> CheckpointConfig:
    """The decoder's part of a config.json; `text_types` are the model types read as this
    decoder (the first is a text_config's default); `refused` maps model types of the same
    family this entry does not load to why (e.g. the mixture-of-experts sizes)."""
    top, model_type = raw, raw.get("model_type")
    multimodal, text = multimodal_type is not None and model_type == multimodal_type, raw
    if multimodal:
        text = raw.get("text_config") or {}
        model_type = text.get("model_type", text_types[0])
    if model_type in refused:
        raise UnsupportedConfig(f"model_type {model_type!r}: {refused[model_type]}")
    if model_type not in text_types:
        also = f", or {multimodal_type!r} with a text_config" if multimodal_type else ""
        names = ", ".join(repr(t) for t in text_types)
        raise ValueError(
            f"config.json has model_type {model_type!r}; this entry loads {family} "
            f"checkpoints ({names}{also})"
        )
    return CheckpointConfig(dict(text), dict(top), {}, multimodal)


def read_checkpoint_config(
    directory: str | Path,
    text_types: tuple[str, ...],
    multimodal_type: str | None,
    family: str,
    refused: dict[str, str],
    raw: dict | None = None,
) -> CheckpointConfig:
    """config.json (and generation_config.json, if any) of a checkpoint directory; `raw`:
    its config.json as already read (a plan reads it once)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory: pass a checkpoint directory")
    if raw is None:
        raw = read_json(directory / "config.json", ": is it a checkpoint directory?")
    config = split_config(raw, text_types, multimodal_type, family, refused)
    if (directory / "generation_config.json").exists():
        config.generation = read_json(directory / "generation_config.json")
    return config


class DecoderConfig:
    """What a zoo model's config dataclass inherits: reading config.json as transformers
    does. A subclass names its model types, its family, the types it refuses and its
    tying defaults (text config, multimodal config) as class variables."""

    TEXT_TYPE: ClassVar[str]
    # other model types that are this decoder (Mistral and Qwen2 are read by zoo.llama)
    ALSO_TEXT_TYPES: ClassVar[tuple[str, ...]] = ()
    MULTIMODAL_TYPE: ClassVar[str | None] = None  # None: a text-only family
    # a field transformers 5 re-saves under another name: field -> that name (both read)
    RESAVED_AS: ClassVar[dict[str, str]] = {}
    FAMILY: ClassVar[str]
    REFUSED_MODEL_TYPES: ClassVar[dict[str, str]] = {}
    TIE_DEFAULTS: ClassVar[tuple[bool, bool]] = (False, False)
    ROPE_TYPES: ClassVar[tuple[str, ...]] = (
        "default",
        "linear",
        "llama3",
    )  # zoo.core.checkpoint.rope

    @classmethod
    def text_fields(cls, text: dict) -> dict:
        """The text config as this class reads it (legacy spellings folded in)."""
        return text

    @classmethod
    def from_checkpoint_config(cls, checkpoint: CheckpointConfig):
        text = cls.text_fields(checkpoint.text)
        spelled = {f: as_ for f, as_ in cls.RESAVED_AS.items() if f not in text and as_ in text}
        text = {**text, **{f: text[as_] for f, as_ in spelled.items()}}
        values = typed_fields(cls, text, "config.json", spelled)
        values["tie_word_embeddings"] = checkpoint.tie_word_embeddings(*cls.TIE_DEFAULTS)
        values["stop_token_ids"] = checkpoint.stop_token_ids(cls.eos_token_id)
        config = cls(**values)
        # the context the model was trained for, as config.json says (a longer --capacity
        # is warned in the plan)
        positions = checkpoint.text.get("max_position_embeddings")
        whole = isinstance(positions, int) and not isinstance(positions, bool) and positions > 0
        config.trained_positions = positions if whole else None
        outside = [t for t in config.stop_token_ids if t >= config.vocab_size]
        if outside:
            raise ValueError(
                f"eos_token_id {outside} is outside the vocabulary of {config.vocab_size} "
                "tokens (config.json or generation_config.json): fix the id"
            )
        return config

    @classmethod
    def from_dict(cls, raw: dict):
        """From a config.json object (text-only or multimodal layout)."""
        return cls.from_checkpoint_config(split_config(raw, *cls._types()))

    @classmethod
    def from_checkpoint(cls, directory: str | Path, raw: dict | None = None):
        """From a checkpoint directory: config.json (or `raw`, the object read from it) and
        generation_config.json."""
        return cls.from_checkpoint_config(read_checkpoint_config(directory, *cls._types(), raw))

    def settle_plain_fields(self) -> list[str]:
        """For the plain decoders' fields (Llama, Qwen3, OLMo 2): KV heads, head dim, RoPE
        and stop ids as transformers defaults them; returns the parts of them this zoo does
        not implement (pass the list, with the entry's own, to `refuse`)."""
        from zoo.core.checkpoint.rope import rope_parameters

        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        theta = 10_000.0 if self.rope_theta is None else self.rope_theta
        self.rope_parameters = rope_parameters(
            self.rope_parameters, self.rope_scaling, theta, self.ROPE_TYPES
        )
        if not self.stop_token_ids:
            eos = self.eos_token_id
            self.stop_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
        unsupported = []
        if self.hidden_act != "silu":
            unsupported.append(f"hidden_act={self.hidden_act!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            unsupported.append(
                f"{self.num_attention_heads} query heads over {self.num_key_value_heads} KV heads"
            )
        return unsupported

    def experts(self) -> int:
        """Experts in a mixture-of-experts layer, as config.json spells the count (0: dense)."""
        return getattr(self, "num_experts", None) or getattr(self, "num_local_experts", 0) or 0

    def check_top_k(self, top_k: str = "num_experts_per_tok") -> None:
        """The experts each token takes (the field `top_k`) must be 1 to the experts there
        are (as config.json spells the count)."""
        count_name = next(n for n in ("num_experts", "num_local_experts") if hasattr(self, n))
        chosen, count = getattr(self, top_k), getattr(self, count_name)
        if not 1 <= chosen <= count:
            raise ValueError(f"config.json: {top_k}={chosen} is not 1 to {count_name}={count}")

    def refuse(self, unsupported: list[str]) -> None:
        if unsupported:
            raise UnsupportedConfig(
                f"this {self.FAMILY} entry does not implement: " + "; ".join(unsupported)
            )

    @classmethod
    def model_types(cls) -> tuple[str, ...]:
        """Every config.json `model_type` this entry loads."""
        types = (cls.TEXT_TYPE, *cls.ALSO_TEXT_TYPES, cls.MULTIMODAL_TYPE)
        return tuple(t for t in types if t)

    @classmethod
    def _types(cls) -> tuple:
        text_types = (cls.TEXT_TYPE, *cls.ALSO_TEXT_TYPES)
        return text_types, cls.MULTIMODAL_TYPE, cls.FAMILY, cls.REFUSED_MODEL_TYPES


def typed_fields(cls: type, values: dict, source: str, spelled: dict | None = None) -> dict:
    """The dataclass fields of `cls` found in `values`, each checked against its type
    (an int must be an int, not "6" or true), so a bad config fails before a model is built.
    A problem names the field as the file spells it (`spelled`: field -> that name)."""
    spelled = spelled or {}
    hints = typing.get_type_hints(cls)
    chosen, problems = {}, []
    for item in fields(cls):
        if item.name not in values:
            continue
        value, hint = values[item.name], hints[item.name]
        allowed = (
            typing.get_args(hint) if typing.get_origin(hint) in (Union, UnionType) else (hint,)
        )
        plain = [typing.get_origin(a) or a for a in allowed]
        ok = (
            (value is None and type(None) in plain)
            or (isinstance(value, bool) and bool in plain)
            or (not isinstance(value, bool) and isinstance(value, int) and int in plain)
            or (isinstance(value, int | float) and not isinstance(value, bool) and float in plain)
            or any(isinstance(value, t) for t in plain if t in (str, dict, list))
        )
        if not ok:
            names = " or ".join("null" if a is type(None) else a.__name__ for a in plain)
            problems.append(f"{spelled.get(item.name, item.name)}={value!r} (expected {names})")
        chosen[item.name] = value
    problems += [
        f"{spelled.get(name, name)}={value!r} ({why})"
        for name, value in chosen.items()
        if (why := _out_of_range(name, value))
    ]
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    return chosen


# config.json numbers that must be positive wherever a model has them (zero or less would
# export fine and decode nonsense)
POSITIVE_FIELDS = {
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "global_head_dim",
    "sliding_window",
    "rms_norm_eps",
    "rope_theta",
    "query_pre_attn_scalar",
    # a cap of 0 divides by zero in transformers (NaN logits); null means no cap
    "final_logit_softcapping",
    "attn_logit_softcapping",
    "moe_intermediate_size",
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
}


def _out_of_range(name: str, value) -> str | None:
    """Why a config number cannot be right, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return "expected a finite number"
    if (name in POSITIVE_FIELDS or name.endswith("_eps")) and value <= 0:
        return "expected a number above 0"
    if value < 0 and (name.startswith("num_") or name.endswith(COUNT_SUFFIXES)):
        return "expected 0 or more"  # a size or a count, whatever the model calls it
    return None


# config.json numbers that count or size something, by their name's end (or `num_...`)
COUNT_SUFFIXES = ("_size", "_dim", "_heads", "_layers", "_input", "_interval", "_experts")


# (our module name, module with its own tensors loaded) -> the module to keep in its place
