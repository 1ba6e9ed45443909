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

from zoo.core.provenance import ZOO_VERSION  # noqa: E402

__version__ = ZOO_VERSION

# Library warnings no zoo user can act on stay out of the output (ZOO_DEBUG=1 shows them).
from zoo.core.quiet import quiet_loggers  # noqa: E402

quiet_loggers()

# A Ctrl-C must land on the main thread, never on a thread numpy starts (zoo.core.sigint).
from zoo.core.sigint import import_numpy_without_sigint  # noqa: E402

import_numpy_without_sigint()

_PUBLIC = {
    "export": "zoo.core.run",
    "export_model": "zoo.core.decode",
    "run_plan": "zoo.core.run",
    "plan_export": "zoo.core.plan",
    "ExportPlan": "zoo.core.plan",
    "load": "zoo.core.entry",
    "get_entry": "zoo.core.entry",
    "Generator": "zoo.core.generator",
    "GenerationRequest": "zoo.core.request",
    "asset_prompt": "zoo.core.media",
    "DecodeSpec": "zoo.core.spec",
    "ContextFullError": "zoo.core.spec",
    # what the recipes use: a torch module exported as it is, the runtime, an asset opened
    "export_module": "zoo.core.export",
    "Model": "zoo.core.runtime",
    "open_asset": "zoo.core.asset",
    "read_metadata": "zoo.core.asset",
    "get_preset": "zoo.core.compress",
    "get_strategy": "zoo.core.kv",
    # transformers as the reference (tests and recipes; needs the `test` extra)
    "make_tiny_checkpoint": "zoo.reference",
    "reference_model": "zoo.reference",
    "greedy_reference": "zoo.reference",
    # results with where and when, calls in a child (real weights: `zoo.fetch.fetch`; the
    # name `zoo.fetch` is that module's)
    "write_record": "zoo.core.records",
    "run_isolated": "zoo.core.isolate",
}
_RENAMED = {"export_module": "export"}  # the facade's name -> the module's
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'zoo' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), _RENAMED.get(name, name))
