"""`generate --chat`: the checkpoint's chat template around the prompt, text streamed until
the model's end of turn, with tokenizers that carry each model's special tokens."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

transformers = pytest.importorskip("transformers")

GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
QWEN_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def cli(model: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"zoo.{model}", *args], capture_output=True, text=True, timeout=600
    )


def test_gemma4_chat_stops_at_the_end_of_turn(tmp_path):
    from safetensors.torch import load_file, save_file

    from zoo.reference import write_tokenizer
    from zoo.released import released_configs, scale_down, write_checkpoint

    config = scale_down(json.loads(released_configs("gemma4")["gemma-4-E2B-it"].read_text()))
    checkpoint = write_checkpoint(config, tmp_path / "ck")
    specials = {1: "<eos>", 2: "<bos>", 105: "<start_of_turn>", 106: "<end_of_turn>"}
    write_tokenizer(checkpoint, 128, specials)
    (checkpoint / "chat_template.jinja").write_text(GEMMA_TEMPLATE)
    (checkpoint / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<bos>"}))
    (checkpoint / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 106]}))
    # <bos> <start_of_turn> user(unknown: 0) w5 w9 <end_of_turn> <start_of_turn> model(0)
    chat_ids = [2, 105, 0, 5, 9, 106, 105, 0]
    reference = transformers.Gemma4ForConditionalGeneration.from_pretrained(
        checkpoint, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        first = int(reference(torch.tensor([chat_ids])).logits[0, -1].argmax())
    # make the end-of-turn row score like the reply's first token: the reply soon ends
    # (the row is also <end_of_turn>'s input embedding, so the context changes with it)
    weights = load_file(checkpoint / "model.safetensors")
    key = "model.language_model.embed_tokens.weight"
    weights[key][106] = weights[key][first] * 1.5
    save_file(weights, checkpoint / "model.safetensors", metadata={"format": "pt"})

    asset = tmp_path / "g4.aimodel"
    export = cli(
        "gemma4",
        "export",
        str(checkpoint),
        str(asset),
        "--capacity",
        "32",
        "--strategy",
        "input-mask-blend",
    )
    assert export.returncode == 0, export.stderr[-2000:]
    chat = cli("gemma4", "generate", str(asset), "--chat", "--prompt", "w5 w9")
    assert chat.returncode == 0, chat.stderr[-2000:]
    assert f"{len(chat_ids)} prompt tokens" in chat.stderr
    # transformers with the released stop list ends the reply at the same token
    reference = transformers.Gemma4ForConditionalGeneration.from_pretrained(
        checkpoint, dtype=torch.float32
    ).eval()
    want = reference.generate(
        torch.tensor([chat_ids]), max_new_tokens=24, do_sample=False, eos_token_id=[1, 106]
    )[0, len(chat_ids) :].tolist()
    assert want[-1] in (1, 106) and len(want) < 24, want  # the reply ended
    assert f"{len(want)} tokens in" in chat.stderr
    words = [t for t in want if t not in specials]  # special tokens are not printed
    assert chat.stdout.split() == [f"w{t}" for t in words]


def test_qwen3_5_chat_template_and_stop_list(tmp_path):
    from zoo.core.asset.opened import read_metadata
    from zoo.reference import make_tiny_checkpoint, write_tokenizer

    checkpoint = make_tiny_checkpoint("qwen3_5", tmp_path / "ck")
    write_tokenizer(checkpoint, 128, {126: "<|im_start|>", 127: "<|im_end|>"})
    (checkpoint / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN_TEMPLATE}))
    (checkpoint / "generation_config.json").write_text(json.dumps({"eos_token_id": [127, 1]}))
    asset = tmp_path / "q.aimodel"
    assert cli("qwen3_5", "export", str(checkpoint), str(asset), "--capacity", "32").returncode == 0
    assert read_metadata(asset)["decode"]["stop_token_ids"] == [127, 1]
    chat = cli(
        "qwen3_5", "generate", str(asset), "--chat", "--prompt", "w5 w9", "--max-new-tokens", "4"
    )
    assert chat.returncode == 0, chat.stderr[-2000:]
    assert "7 prompt tokens" in chat.stderr  # <|im_start|> user w5 w9 <|im_end|> <|im_start|> a
    system = cli("qwen3_5", "generate", str(asset), "--system", "w3", "--prompt", "w5 w9")
    assert system.returncode == 0, system.stderr[-2000:]  # --system implies --chat
    assert "11 prompt tokens" in system.stderr  # + <|im_start|> system w3 <|im_end|>
    no_template = cli(
        "gemma4",
        "generate",
        str(asset),
        "--chat",
        "--prompt",
        "x",
        "--tokenizer",
        str(tmp_path / "missing.json"),
    )
    assert no_template.returncode == 2 and "no such file" in no_template.stderr


def test_a_system_turn_comes_before_the_users(tmp_path):
    from zoo.core.asset.tokenizer import chat_prompt

    (tmp_path / "chat_template.jinja").write_text(QWEN_TEMPLATE)
    rendered = chat_prompt(tmp_path, "w5", system="be brief")
    assert rendered.startswith("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nw5")
    assert chat_prompt(tmp_path, "w5").startswith("<|im_start|>user\nw5")


@pytest.mark.parametrize(
    "template,named",
    [
        # nested loops that write nothing: stopped by the time limit
        (
            "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
            "ran over",
        ),
        # loops that write: stopped by the size limit (1,000 characters an iteration reach
        # it in a thousand iterations, long before the time limit on a loaded machine)
        (
            "{% for i in range(99999) %}{% for j in range(99999) %}{{ 'y' * 1000 }}"
            "{% endfor %}{% endfor %}",
            "wrote over",
        ),
        ("{{ 'x' * 999999999 }}", "wrote over 1,000,000 characters"),
        ("{{ 2 ** 99999999 }}", "raised a number to the power 99999999"),
    ],
)
def test_a_chat_template_that_runs_away_is_stopped(tmp_path, monkeypatch, template, named):
    """A chat template is code from the checkpoint: rendering has a time and a size limit."""
    import time

    from zoo.core.asset import tokenizer
    from zoo.core.asset.tokenizer import chat_prompt

    monkeypatch.setattr(tokenizer, "TEMPLATE_SECONDS", 0.5)
    (tmp_path / "chat_template.jinja").write_text(template)
    started = time.monotonic()
    with pytest.raises(ValueError, match=f"chat_template.jinja: the chat template {named}"):
        chat_prompt(tmp_path, "hi")
    assert time.monotonic() - started < 5
    (tmp_path / "chat_template.jinja").write_text(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    )
    assert chat_prompt(tmp_path, "hi", "be brief") == "<system>be brief<user>hi"
