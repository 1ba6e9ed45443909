"""The experiments behind the gotcha pages: isolation cells of KV writes (crash repros
included), the expected outcome of each cell per OS build and compute unit, child processes
that contain runtime crashes, and the per-op profile. Not needed to export or decode."""
