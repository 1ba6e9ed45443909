"""A decoder's building blocks in torch, written to export cleanly: layers, the KV cache, the
gated delta rule, experts, layouts, the model contract and the zoo entry that loads a model."""
