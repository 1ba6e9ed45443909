"""Checks every mixture-of-experts family shares (`zoo.testing`'s, for experts): the two
formulations, compression of the experts, and the runtime tests each family's module takes
as they are (`mixture_of_experts_tests`)."""

from __future__ import annotations

from pathlib import Path

from zoo.testing import ExportedAssets, check_layout_computes_the_same, check_runtime_greedy


def other_formulation() -> str:
    """The test layout computing the experts the other way from the default asset's
    (`--experts auto`: every expert in Linux's blocked layout, the chosen ones on a Mac)."""
    from zoo.core.model.layout import auto_experts, default_layout

    default = auto_experts(default_layout()["weights"])
    return "chosen-experts" if default == "all" else "all-experts"


def check_experts_computed_both_ways(
    model: str,
    checkpoints: dict,
    assets: ExportedAssets,
    strategy: str,
    prompt: list[int],
    variant: str = "default",
) -> None:
    """A mixture of experts exported computing the experts the other way from the default
    asset (GatherMM on Linux, every expert weighted on a Mac) decodes like transformers
    and like the default asset."""
    other = other_formulation()
    check_runtime_greedy(model, checkpoints, assets, variant, strategy, prompt, other)
    check_layout_computes_the_same(assets, variant, strategy, other)


def mixture_of_experts_tests(model: str, prompt: list[int], chunk: int) -> dict:
    """The runtime tests every mixture-of-experts family shares, for its test module's
    namespace (`globals().update(...)`): greedy tokens and logits like transformers with
    both KV strategies, every expert weighted like the chosen ones, and layer ranges.
    They use the module's `checkpoints` and `assets` fixtures (`entry_fixtures`)."""
    import pytest

    strategies = pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])

    @strategies
    def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, strategy):
        assert len(prompt) > chunk  # the prompt spans prefill chunks and single steps
        check_runtime_greedy(model, checkpoints, assets, "default", strategy, prompt)

    @strategies
    def test_every_expert_weighted_computes_what_the_chosen_ones_compute(
        checkpoints, assets, strategy
    ):
        check_experts_computed_both_ways(model, checkpoints, assets, strategy, prompt)

    @strategies
    def test_layer_ranges_decode_like_transformers_and_like_one_function(
        checkpoints, assets, strategy
    ):
        from zoo.core.asset.decode_spec import DecodeSpec

        layout = "ranges"
        check_runtime_greedy(model, checkpoints, assets, "default", strategy, prompt, layout)
        check_layout_computes_the_same(assets, "default", strategy, layout)
        assert len(DecodeSpec.of_asset(assets["default", strategy, layout]).ranges) == 4

    return {
        test.__name__: test
        for test in (
            test_greedy_tokens_on_the_runtime_match_transformers,
            test_every_expert_weighted_computes_what_the_chosen_ones_compute,
            test_layer_ranges_decode_like_transformers_and_like_one_function,
        )
    }


def check_experts_compressed_stacked(checkpoint, directory, prompt: list[int] | None) -> None:
    """Experts are compressed stacked (`zoo.core.compression.stores`), whether published stacked
    (GPT-OSS, Gemma 4) or one module per expert (stacked as they are read, before
    compression): `--compress` keeps `--experts auto` on the chosen experts, GatherMM
    reads the codes, the router stays float32, and the chosen and every-expert assets
    decode the same tokens on the runtime (`prompt`; None: the plans only, for a family
    whose experts compute as another's already tested)."""
    from torch.nn.utils import parametrize

    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.core.model.entry import load
    from zoo.core.model.experts import StackedExperts

    directory = Path(directory)
    model = load(checkpoint, capacity=64, compress="int4-block32", experts="chosen")
    stacked = [m for m in model.modules() if isinstance(m, StackedExperts)]
    assert stacked and all(
        parametrize.is_parametrized(m, state) for m in stacked for state in m.COMPRESSED
    )
    assert not any(
        parametrize.is_parametrized(m) for m in model.modules() if hasattr(m, "is_router")
    )
    # uncompressed, auto follows the weights layout (zoo.core.model.layout.auto_experts)
    for weights, formulation in (("blocked", "all"), ("linear", "chosen")):
        auto = plan_export(checkpoint, directory / "auto.aimodel", weights=weights)
        assert auto.experts == formulation, (weights, auto.experts)
    tokens = {}
    for experts in ("auto", "all"):
        plan = plan_export(
            checkpoint, directory / f"{experts}.aimodel", compress="int4-block32", experts=experts
        )
        assert plan.experts == ("chosen" if experts == "auto" else "all")
        if prompt is None:
            continue
        got = run_isolated(runtime_greedy, str(run_plan(plan)), prompt, timeout=300)
        assert got.ok, got.summary()
        tokens[experts] = got.result["tokens"]
    assert tokens.get("auto") == tokens.get("all"), tokens
