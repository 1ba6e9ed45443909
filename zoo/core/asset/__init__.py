"""The asset contract, read by the export that writes it and the host that runs it: the opened
asset and its metadata, the `DecodeSpec`, the KV write strategies, sidecar tables, the
tokenizer and the kinds of encoder component."""
