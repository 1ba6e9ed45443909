"""Checkpoints as the model repositories publish them (issue: real config.json files).

- every released config.json of every zoo entry (zoo/*/released/), scaled down, either
  decodes like transformers on the runtime (tokens and logits) or is refused naming why;
- our config readers agree with transformers' config classes on every field we use;
- the spellings transformers never writes back: `global_head_dim`, top-level tying of the
  multimodal layouts, RoPE fields beside `rope_parameters`, stop lists in
  generation_config.json / the top level, `use_bidirectional_attention="vision"`.
"""

from __future__ import annotations

import json

import pytest
import torch

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.entry import get_entry
from zoo.gemma4 import Gemma4Config, load_gemma4, torch_logits
from zoo.qwen3_5 import Qwen3_5Config, load_qwen3_5
from zoo.qwen3_5 import torch_logits as qwen_logits
from zoo.released import MODELS, PROMPT, released_configs, released_row, scale_down
from zoo.site.harness import ROOT

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

transformers = pytest.importorskip("transformers")

CASES = [(model, name) for model in MODELS for name in released_configs(model)]
# What a refused size must name (none is refused today).
REFUSED: dict[str, str] = {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("released")


@pytest.mark.parametrize("model,name", CASES, ids=[n for _, n in CASES])
def test_released_config_decodes_like_transformers_or_is_refused(model, name, workdir):
    row = released_row(model, name, workdir)
    if name in REFUSED:
        assert row["outcome"].startswith("refused:"), row
        assert REFUSED[name] in row["outcome"], row
        return
    assert row["outcome"] == "decodes like transformers", row
    assert row["greedy tokens on the runtime"] == "8/8 identical", row
    assert row["logits max abs error (runtime)"] < 1e-4, row


def test_every_released_size_has_a_fixture():
    names = {name for _, name in CASES}
    for size in ("E2B", "E4B", "12B", "31B", "26B-A4B"):
        assert f"gemma-4-{size}-it" in names
    for size in ("0.8B", "2B", "4B", "9B", "27B", "35B-A3B", "122B-A10B", "397B-A17B"):
        assert f"Qwen3.5-{size}" in names
    for size in ("135M", "360M", "1.7B"):
        assert f"SmolLM2-{size}-Instruct" in names
    for size in ("3.2-1B", "3.2-3B", "3.1-8B"):
        assert f"Llama-{size}-Instruct" in names
    for size in ("270m", "1b-it", "4b-it", "12b-it", "27b-it"):
        assert f"gemma-3-{size}" in names
    for size in ("0.6B", "1.7B", "4B", "8B", "14B", "32B"):
        assert f"Qwen3-{size}" in names
    for size in ("0.5B-Instruct", "1.5B-Instruct", "3B", "7B", "14B", "32B"):
        assert f"Qwen2.5-{size}" in names
    for name in ("7B-v0.1", "7B-Instruct-v0.2", "7B-Instruct-v0.3", "Nemo-Instruct-2407"):
        assert f"Mistral-{name}" in names
    for name in ("0425-1B", "1124-7B", "1124-13B", "0325-32B"):
        assert f"OLMo-2-{name}-Instruct" in names
    for name in ("30B-A3B", "235B-A22B", "Coder-30B-A3B-Instruct"):
        assert f"Qwen3-{name}" in names
    for name in ("8x7B-v0.1", "8x7B-Instruct-v0.1", "8x22B-v0.1", "8x22B-Instruct-v0.1"):
        assert f"Mixtral-{name}" in names
    assert {"gpt-oss-20b", "gpt-oss-120b"} <= names


def test_scale_down_keeps_every_key_and_its_spelling():
    for model, name in CASES:
        released = json.loads(released_configs(model)[name].read_text())
        tiny = scale_down(released)
        assert set(tiny) == set(released)
        text, released_text = tiny.get("text_config", tiny), released.get("text_config", released)
        assert set(text) == set(released_text)
        assert text["num_hidden_layers"] <= 12
        if "layer_types" in text:
            assert len(text["layer_types"]) == text["num_hidden_layers"]
            assert text["layer_types"][-1] == "full_attention"


def hf_text_config(raw: dict):
    """transformers' own reading of a config.json object (the text decoder's part)."""
    config = transformers.AutoConfig.for_model(**raw)
    return config.get_text_config() if hasattr(config, "get_text_config") else config


@pytest.mark.parametrize("model,name", [c for c in CASES if c[1] not in REFUSED])
def test_our_reader_agrees_with_transformers_config_classes(model, name):
    raw = scale_down(json.loads(released_configs(model)[name].read_text()))
    theirs = hf_text_config(raw)
    if model in ("gemma4", "gemma4_unified"):
        ours = get_entry(model).config.from_dict(raw)
        for layer in range(ours.num_hidden_layers):
            their_layer = theirs.per_layer_config[layer]  # a config per layer
            assert ours.layer_head_dim(layer) == their_layer.head_dim
            assert ours.layer_kv_heads(layer) == their_layer.num_key_value_heads
        assert ours.kv_sharing_modes() == theirs.kv_sharing_modes
        same = ["sliding_window", "hidden_size_per_layer_input", "attention_k_eq_v"]
    elif model in ("qwen3_5", "qwen3_5_moe"):
        ours = get_entry(model).config.from_dict(raw)
        for key in ("rope_type", "rope_theta", "partial_rotary_factor"):
            assert ours.rope_parameters[key] == theirs.rope_parameters[key]
        same = ["head_dim", "linear_num_key_heads", "linear_num_value_heads"]
        if model == "qwen3_5_moe":
            same += ["num_experts", "num_experts_per_tok", "shared_expert_intermediate_size"]
    else:  # the plain decoders: one RoPE (Llama, Qwen3) or one per layer kind (Gemma 3)
        ours = get_entry(model).config.from_dict(raw)
        theirs_rope, ours_rope = theirs.rope_parameters, ours.rope_parameters
        if "rope_type" in ours_rope:
            theirs_rope, ours_rope = {"all": theirs_rope}, {"all": ours_rope}
        for kind, rope in theirs_rope.items():
            assert {k: v for k, v in rope.items() if v is not None} == ours_rope[kind], kind
        derived = theirs.hidden_size // theirs.num_attention_heads  # Qwen2 has no head_dim
        assert ours.head_dim == (getattr(theirs, "head_dim", None) or derived)
        same = ["num_key_value_heads"]
        if raw.get("model_type") in ("mistral", "phi3"):
            same += ["sliding_window"]
        if model == "gemma3":
            same += ["sliding_window", "layer_types", "query_pre_attn_scalar"]
    for key in ["num_hidden_layers", "hidden_size", *same]:
        assert getattr(ours, key) == getattr(theirs, key), key
    top = transformers.AutoConfig.for_model(**raw)
    assert ours.tie_word_embeddings == top.tie_word_embeddings


def test_gemma4_global_head_dim_spelling_loads(tmp_path):
    """The released spelling: full-attention layers sized by global_head_dim (not
    per_layer_config); failed with 'tensors of the wrong shape' before."""
    config = transformers.Gemma4TextConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        layer_types=["sliding_attention", "full_attention"],
        hidden_size_per_layer_input=0,
        sliding_window=4,
    )
    torch.manual_seed(0)
    reference = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager"
    ).eval()
    reference.save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    raw.pop("per_layer_config")
    raw.update(global_head_dim=32, num_global_key_value_heads=None)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    ours = load_gemma4(tmp_path, "runtime-index", 32)
    assert ours.config.layer_head_dim(1) == 32
    with torch.no_grad():
        want = reference(torch.tensor([PROMPT])).logits
    assert (torch_logits(ours, PROMPT) - want).abs().max().item() < 1e-4


def test_multimodal_tying_follows_the_top_level(tmp_path):
    """text_config says tied, the top level (which transformers follows) does not: the
    checkpoint's lm_head.weight must be used (before: `22 22 22 ...`)."""
    from zoo.qwen3_5 import TINY

    text = {**TINY.text, "tie_word_embeddings": True}
    config = transformers.Qwen3_5Config(text_config=text, **TINY.towers)
    torch.manual_seed(0)
    reference = transformers.Qwen3_5ForConditionalGeneration(config).eval()
    assert not config.tie_word_embeddings and config.text_config.tie_word_embeddings
    reference.save_pretrained(tmp_path)
    ours = load_qwen3_5(tmp_path, "runtime-index", 32)
    assert not ours.config.tie_word_embeddings
    with torch.no_grad():
        want = reference(torch.tensor([PROMPT])).logits
    assert (qwen_logits(ours, PROMPT) - want).abs().max().item() < 1e-4


def test_rope_fields_beside_rope_parameters_are_folded_in():
    """The Qwen3-Next spelling: rope_theta / partial_rotary_factor at the config's top."""
    raw = {
        "model_type": "qwen3_5_text",
        "num_hidden_layers": 4,
        "rope_parameters": {"rope_type": "default"},
        "rope_theta": 1e6,
        "partial_rotary_factor": 0.5,
    }
    ours = Qwen3_5Config.from_dict(raw)
    theirs = transformers.Qwen3_5TextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    assert ours.rope_parameters["rope_theta"] == theirs.rope_parameters["rope_theta"] == 1e6
    assert ours.rope_parameters["partial_rotary_factor"] == 0.5
    assert theirs.rope_parameters["partial_rotary_factor"] == 0.5


def test_stop_ids_come_from_generation_config_and_the_top_level(tmp_path):
    raw = json.loads(released_configs("gemma4")["gemma-4-E2B-it"].read_text())
    assert Gemma4Config.from_dict(raw).stop_token_ids == [1, 106]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [107, 1]}))
    assert Gemma4Config.from_checkpoint(tmp_path).stop_token_ids == [107, 1, 106]
    for bad in (True, "1", -1):
        raw["eos_token_id"] = bad
        with pytest.raises(ValueError, match="not a token id"):
            Gemma4Config.from_dict(raw)


def test_bidirectional_vision_attention_is_text_only_causal():
    raw = json.loads(released_configs("gemma4")["gemma-4-31B-it"].read_text())
    assert Gemma4Config.from_dict(raw).use_bidirectional_attention == "vision"
    raw["text_config"]["use_bidirectional_attention"] = "all"
    with pytest.raises(UnsupportedConfig, match="use_bidirectional_attention='all'"):
        Gemma4Config.from_dict(raw)


def test_generate_stops_at_the_released_end_of_turn_id(tmp_path):
    """A tiny E2B whose tied embedding row 106 (end of turn) outscores the first greedy
    token: generate ends there, as transformers does with the released stop list."""
    from safetensors.torch import load_file, save_file

    from zoo.core.host.generator import Generator
    from zoo.gemma4 import export_gemma4
    from zoo.released import write_checkpoint

    raw = scale_down(json.loads(released_configs("gemma4")["gemma-4-E2B-it"].read_text()))
    checkpoint = write_checkpoint(raw, tmp_path / "ck")
    reference = transformers.Gemma4ForConditionalGeneration.from_pretrained(
        checkpoint, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        first = int(reference(torch.tensor([PROMPT])).logits[0, -1].argmax())
    weights = load_file(checkpoint / "model.safetensors")
    key = "model.language_model.embed_tokens.weight"
    weights[key][106] = weights[key][first] * 1.5
    save_file(weights, checkpoint / "model.safetensors", metadata={"format": "pt"})
    asset = export_gemma4(
        load_gemma4(checkpoint, "input-mask-blend", 32), tmp_path / "e2b.aimodel", chunk=4
    )
    with Generator(asset) as generator:
        assert generator.spec.stop_token_ids == [1, 106]
        assert generator.generate(PROMPT, 8) == [106]
        assert len(generator.generate(PROMPT, 3, stop_token_ids=[])) == 3
    reference = transformers.Gemma4ForConditionalGeneration.from_pretrained(
        checkpoint, dtype=torch.float32
    ).eval()
    want = reference.generate(torch.tensor([PROMPT]), max_new_tokens=8, do_sample=False)
    assert want[0, len(PROMPT) :].tolist() == [106]


def test_greedy_parity_compares_the_logits_not_only_the_tokens():
    """A tiny random model often repeats one token; equal tokens then prove little, so the
    runtime's logits rows are held to transformers' too (NaN when the tokens differ)."""
    import math

    import numpy as np

    from zoo.testing import LOGITS_TOLERANCE, logits_error

    want_rows = np.zeros((3, 4))
    got = {"tokens": [1, 1, 1], "logits": (want_rows + 1e-6).tolist()}
    assert logits_error(got, [1, 1, 1], want_rows) < LOGITS_TOLERANCE
    got["logits"][2][0] = 0.5  # same argmax, wrong numbers
    assert logits_error(got, [1, 1, 1], want_rows) == 0.5
    assert math.isnan(logits_error(got, [1, 1, 2], want_rows))


def test_released_sizes_are_listed_as_a_reader_scans_them():
    # family, then version, then size: the order of every released table on the site
    assert list(released_configs("phi3")) == [
        "Phi-3-mini-4k-instruct",
        "Phi-3-medium-4k-instruct",
        "Phi-4-mini-instruct",
        "Phi-4",
    ]
    llama = list(released_configs("llama"))
    assert llama.index("Llama-3.1-8B-Instruct") < llama.index("Llama-3.2-1B-Instruct")
    assert llama.index("Mistral-7B-v0.1") < llama.index("Mistral-7B-Instruct-v0.2")
    assert llama.index("Mistral-7B-Instruct-v0.3") < llama.index("Mistral-Nemo-Instruct-2407")
    smollm2 = [name for name in llama if name.startswith("SmolLM2")]
    assert smollm2 == ["SmolLM2-135M-Instruct", "SmolLM2-360M-Instruct", "SmolLM2-1.7B-Instruct"]
    assert list(released_configs("gemma3"))[0] == "gemma-3-270m"
    assert list(released_configs("gemma4"))[:2] == ["gemma-4-E2B-it", "gemma-4-E4B-it"]
    assert list(released_configs("gemma4_unified")) == ["gemma-4-12B-it"]
    # the release date in OLMo 2's names is not a size
    assert list(released_configs("olmo2"))[-1] == "OLMo-2-0325-32B-Instruct"
    # the committed records list their rows in the same order
    for model in MODELS:
        record = json.loads((ROOT / "docs" / "records" / f"{model}-released.json").read_text())
        rows = [row["released config"] for row in record["results"]["rows"]]
        assert rows == list(released_configs(model)), model
