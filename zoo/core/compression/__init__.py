"""How an export stores weights: the presets through coreai-opt, GPTQ's calibrated codes, and
the plain encoding written for this runtime."""
