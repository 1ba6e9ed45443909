"""The runtime side, without torch: an asset loaded and driven token by token, speculative
decoding, sampling, and images and audio prepared on the host."""
