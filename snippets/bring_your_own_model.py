"""Bring your own model: a checkpoint folder, a GGUF file or a Hugging Face
id in, an asset out, with one command (`zoo export`), planned first.

Run: python snippets/bring_your_own_model.py
     (writes ./tiny-llama, a checkpoint folder, and ./hf, a local Hugging
     Face cache holding it as my-org/tiny-llama; the conversion guide's
     commands run in that directory)
"""

# --8<-- [start:folder]
from zoo.reference import make_tiny_checkpoint

# Stands for a model you downloaded: config.json + *.safetensors (and the
# tokenizer files). A tiny Llama with random weights, by save_pretrained.
checkpoint = make_tiny_checkpoint("llama", "tiny-llama")
print(sorted(path.name for path in checkpoint.iterdir()))
# --8<-- [end:folder]

# --8<-- [start:hub]
import shutil
from pathlib import Path

# What `hf download my-org/tiny-llama` leaves in $HF_HOME/hub: the files
# under snapshots/REVISION, and refs/main naming that revision.
revision = "0123456789abcdef0123456789abcdef01234567"
repo = Path("hf/hub/models--my-org--tiny-llama")
shutil.copytree(checkpoint, repo / "snapshots" / revision)
(repo / "refs").mkdir()
(repo / "refs" / "main").write_text(revision)
# --8<-- [end:hub]
