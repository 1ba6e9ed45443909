"""A Hugging Face checkpoint read: its config, its tensors (safetensors only), MXFP4 experts as
released, and RoPE as the configs spell it."""
