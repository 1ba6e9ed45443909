"""The Core AI model zoo: export and run open LLMs on Apple's Core AI.

The public API, imported on first use (so `from zoo import Generator` imports no torch):

>>> import zoo                                                     # doctest: +SKIP
>>> plan = zoo.plan_export("tiny-llama", "tiny.aimodel", capacity=64)
>>> print(plan.describe())                 # every option resolved and checked, nothing loaded
>>> asset = zoo.run_plan(plan)             # load -> compress -> convert -> write
>>> with zoo.Generator(asset) as generator:
...     tokens = generator.generate([2, 17, 33], max_new_tokens=8)

`zoo.export(checkpoint, output, **options)` is the plan and its run in one call;
`zoo.load(checkpoint)` a decoder in torch (its entry from config.json's `model_type`);
`zoo.export_model(model, output, ...)` exports a decoder already loaded. Deeper modules
(`zoo.core.*`) stay importable.
"""

from zoo.core.io.provenance import ZOO_VERSION  # noqa: E402

__version__ = ZOO_VERSION

# Library warnings no zoo user can act on stay out of the output (ZOO_DEBUG=1 shows them).
from zoo.core.io.quiet import quiet_loggers  # noqa: E402

quiet_loggers()

# A Ctrl-C must land on the main thread, never on a thread numpy starts (zoo.core.io.sigint).
from zoo.core.io.sigint import import_numpy_without_sigint  # noqa: E402

import_numpy_without_sigint()

_PUBLIC = {
    "export": "zoo.core.export.run",
    "export_model": "zoo.core.export.functions",
    "run_plan": "zoo.core.export.run",
    "plan_export": "zoo.core.export.plan",
    "ExportPlan": "zoo.core.export.plan",
    "load": "zoo.core.model.entry",
    "get_entry": "zoo.core.model.entry",
    "Generator": "zoo.core.host.generator",
    "GenerationRequest": "zoo.core.host.request",
    "asset_prompt": "zoo.core.host.media",
    "DecodeSpec": "zoo.core.asset.decode_spec",
    "ContextFullError": "zoo.core.asset.decode_spec",
    # what the recipes use: a torch module exported as it is, the runtime, an asset opened
    "export_module": "zoo.core.export.convert",
    "Model": "zoo.core.host.runtime",
    "open_asset": "zoo.core.asset.opened",
    "read_metadata": "zoo.core.asset.opened",
    "get_preset": "zoo.core.compression.presets",
    "get_strategy": "zoo.core.asset.kv_writes",
    # transformers as the reference (tests and recipes; needs the `test` extra)
    "make_tiny_checkpoint": "zoo.reference",
    "reference_model": "zoo.reference",
    "greedy_reference": "zoo.reference",
    # results with where and when, calls in a child (real weights: `zoo.fetch.fetch`; the
    # name `zoo.fetch` is that module's)
    "write_record": "zoo.core.io.records",
    "run_isolated": "zoo.core.isolate",
}
_RENAMED = {"export_module": "export"}  # the facade's name -> the module's
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'zoo' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), _RENAMED.get(name, name))
