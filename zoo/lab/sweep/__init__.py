"""The bad-input sweep: cases run for real against `zoo export` and `zoo generate`, each
classed as the reliability issues class them, one module of cases a surface (GGUF files,
hub ids, experts, streamed exports, speculation, generation, images and audio)."""
