"""Bring your own model: a checkpoint folder, a GGUF file or a Hugging Face
id in, an asset out, with one command (`zoo export`), planned first.

Run: python snippets/bring_your_own_model.py
     (writes ./tiny-llama, a checkpoint folder, and ./hf, a local Hugging
     Face cache holding it as my-org/tiny-llama; the conversion guide's
     commands run in that directory)
"""

# --8<-- [start:folder]
from zoo import make_tiny_checkpoint

# Stands for a model you downloaded: config.json + *.safetensors (and the
# tokenizer files). A tiny Llama with random weights, by save_pretrained.
checkpoint = make_tiny_checkpoint("llama", "tiny-llama")
print(sorted(path.name for path in checkpoint.iterdir()))
# --8<-- [end:folder]

# --8<-- [start:hub]
from zoo.reference import as_hub_download

# What `hf download my-org/tiny-llama` leaves in $HF_HOME/hub: each file a
# blob named by its sha256, the snapshot's files links to the blobs, and
# refs/main naming the revision (a sharded model's shards too).
snapshot = as_hub_download(checkpoint, "hf", "my-org/tiny-llama")
for link in sorted(snapshot.iterdir()):
    blob = str(link.readlink())[:22]
    print(f"snapshots/REVISION/{link.name} -> {blob}...")
# --8<-- [end:hub]
