"""Gemma 4 text-decoder configuration, read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Gemma4TextConfig`; a multimodal checkpoint
(`model_type: gemma4`) keeps the text decoder's config under `text_config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig
from zoo.core.checkpoint.rope import check_rope_numbers
from zoo.core.io.files import UnsupportedConfig


@dataclass
class Gemma4Config(DecoderConfig):
    TEXT_TYPE, MULTIMODAL_TYPE, FAMILY = "gemma4_text", "gemma4", "Gemma 4"
    TIE_DEFAULTS = (True, True)  # transformers' defaults: text config, multimodal config

    # sizes
    vocab_size: int = 262_144
    hidden_size: int = 2304
    intermediate_size: int = 9216
    num_hidden_layers: int = 30

    # attention, as the sliding-window layers have it
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 256

    # Full-attention layers have a wider head (and, with attention_k_eq_v, their own KV
    # head count). Released config.json files say so with global_head_dim and
    # num_global_key_value_heads; transformers re-saves them as per_layer_config
    # (layer index -> overrides). Either spelling is read, as transformers reads it.
    global_head_dim: int = 512
    num_global_key_value_heads: int | None = None
    per_layer_config: dict | None = None
    attention_k_eq_v: bool = False

    # layer kinds: RoPE per kind, the window of the sliding ones, norms and activation
    layer_types: list[str] | None = None
    rope_parameters: dict | None = None
    sliding_window: int = 512
    rms_norm_eps: float = 1e-6
    hidden_activation: str = "gelu_pytorch_tanh"

    # per-layer embeddings, KV sharing, the double-wide MLP of the sharing layers
    vocab_size_per_layer_input: int = 262_144
    hidden_size_per_layer_input: int = 256  # 0: no per-layer embeddings
    num_kv_shared_layers: int = 0
    use_double_wide_mlp: bool = False

    # 26B-A4B: a mixture of experts beside each layer's MLP (`enable_moe_block`)
    enable_moe_block: bool = False
    num_experts: int | None = None
    top_k_experts: int | None = None
    moe_intermediate_size: int | None = None

    # refused by name when asked for (check_supported)
    use_bidirectional_attention: str | None = None

    # the head and the special tokens
    final_logit_softcapping: float | None = None
    tie_word_embeddings: bool = True
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 1
    pad_token_id: int | None = 0

    # every id that ends a generation (generation_config.json, top level, text config)
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.layer_types:  # transformers' default: 5 sliding, then 1 full
            self.layer_types = [
                "full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                for i in range(self.num_hidden_layers)
            ]
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for "
                f"{self.num_hidden_layers} layers (num_hidden_layers)"
            )
        self.layer_types[-1] = "full_attention"  # transformers forces this too
        if self.per_layer_config is None:  # the released spelling (see global_head_dim)
            overrides: dict = {"head_dim": self.global_head_dim}
            if self.attention_k_eq_v and self.num_global_key_value_heads is not None:
                overrides["num_key_value_heads"] = self.num_global_key_value_heads
            self.per_layer_config = {
                i: overrides for i, kind in enumerate(self.layer_types) if kind == "full_attention"
            }
        # config.json spells layer indices as zero-padded strings ("04" when there are more
        # than 9 layers); key them by int.
        self.per_layer_config = {int(k): v for k, v in self.per_layer_config.items()}
        if self.rope_parameters is None:  # transformers' defaults, used only when absent
            self.rope_parameters = {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1_000_000.0,
                },
            }
        if not self.stop_token_ids:
            eos = self.eos_token_id
            self.stop_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self.check_supported()

    def check_supported(self) -> None:
        unsupported = []
        if self.enable_moe_block:
            for name in ("num_experts", "top_k_experts", "moe_intermediate_size"):
                if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                    raise ValueError(
                        f"config.json: enable_moe_block needs {name} >= 1, got "
                        f"{getattr(self, name)!r}"
                    )
            self.check_top_k("top_k_experts")
        # "vision" makes image tokens attend both ways; text-only decoding is unchanged.
        if self.use_bidirectional_attention not in (None, "vision"):
            unsupported.append(f"use_bidirectional_attention={self.use_bidirectional_attention!r}")
        if self.hidden_activation != "gelu_pytorch_tanh":
            unsupported.append(f"hidden_activation={self.hidden_activation!r}")
        for layer_type in sorted(set(self.layer_types)):
            rope = self.rope_parameters.get(layer_type)
            if isinstance(rope, dict):
                check_rope_numbers(rope, f"rope_parameters[{layer_type!r}]")
            if not isinstance(rope, dict):
                unsupported.append(f"rope_parameters without {layer_type!r}")
            elif (
                rope.get("rope_type", "default") not in ("default", "proportional")
                or rope.get("factor", 1.0) != 1.0
            ):
                unsupported.append(f"rope_parameters[{layer_type!r}]={rope}")
        if unsupported:
            raise UnsupportedConfig(
                "this Gemma 4 entry does not implement: " + "; ".join(unsupported)
            )

    # Per-layer facts, derived the way transformers derives them.
    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"

    def _override(self, layer: int, name: str, default: int) -> int:
        return self.per_layer_config.get(layer, {}).get(name, default)

    def layer_head_dim(self, layer: int) -> int:
        return self._override(layer, "head_dim", self.head_dim)

    def layer_kv_heads(self, layer: int) -> int:
        return self._override(layer, "num_key_value_heads", self.num_key_value_heads)

    def shared_across_layers(self) -> list[str]:
        """What layer ranges of this size would share (none in 26B-A4B: it streams)."""
        shared = [f"{self.num_kv_shared_layers} KV-shared layers"] * bool(self.num_kv_shared_layers)
        return shared + ["per-layer embeddings"] * bool(self.hidden_size_per_layer_input)

    def kv_sharing_modes(self) -> list[str | None]:
        """Per layer: None (own KV), "store" (own KV, reused later) or "reuse" (no k/v)."""
        if self.num_kv_shared_layers == 0:
            return [None] * self.num_hidden_layers
        first_shared = self.num_hidden_layers - self.num_kv_shared_layers
        modes: list[str | None] = [
            None if i < first_shared else "reuse" for i in range(self.num_hidden_layers)
        ]
        for layer_type in set(self.layer_types):
            producers = [i for i in range(first_shared) if self.layer_types[i] == layer_type]
            if not producers:
                raise UnsupportedConfig(
                    f"config.json: layer_types has no {layer_type!r} layer before the last "
                    f"{self.num_kv_shared_layers} (num_kv_shared_layers), which reuse such "
                    "a layer's KV: check layer_types and num_kv_shared_layers"
                )
            modes[producers[-1]] = "store"
        return modes

    def kv_source(self, layer: int) -> int:
        """The layer whose cache this layer attends over (itself, unless it reuses)."""
        modes = self.kv_sharing_modes()
        if modes[layer] != "reuse":
            return layer
        return next(
            i
            for i, mode in enumerate(modes)
            if mode == "store" and self.layer_types[i] == self.layer_types[layer]
        )
