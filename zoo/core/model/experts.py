"""A mixture of experts: a router picks `top_k` of `experts` gated MLPs for each token, and
their outputs are summed, weighted by the router.

Shared by every MoE family (Qwen3 MoE, Mixtral, GPT-OSS, Qwen3.5 MoE). What differs per
family is data:
- how the router's weights are made (`ROUTINGS`): a softmax over all experts then the top k,
  renormalised over them or not (`norm_topk_prob`: Qwen3 MoE, Qwen3.5 MoE; Mixtral always
  renormalises), or the top k logits first and a softmax over those (GPT-OSS);
- what the checkpoint calls the projections (`gate_proj/up_proj/down_proj`, Mixtral's
  `w1/w3/w2`) and the router (`gate`);
- a shared expert every token takes beside the chosen ones, weighted by a sigmoid gate of
  its own (`shared_intermediate`: Qwen3.5 MoE's `shared_expert`, `shared_expert_gate`).

Experts are loaded as the checkpoints publish them, one module per expert, so the loader
reads and compresses them one at a time like any projection. Two formulations compute the
same numbers, chosen at export (`formulation`, `zoo export --experts`):
- `all`: every expert on every token, weighted by the router (zero for those not chosen).
  Costs `experts / top_k` times the arithmetic; the reference, and what runs anywhere.
- `chosen`: only the chosen experts, with coreai-torch's `GatherMM` over the experts
  stacked `[1, experts, in, out]` (Apple's recipes' formulation: their `SwitchGLU`); the
  stacking is done once (`stack()`), before the export.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

FORMULATIONS = ("all", "chosen")  # `zoo export --experts`


def top_k_ties_to_lowest(values: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest of `values` along the last axis, largest first, equal values taken
    lowest index first: the same choice on every platform. torch's and the runtime's topk
    order exact ties each their own way (torch on CPU picks experts 6 and 5 of 8 equal
    ones); a router with equal logits (all zero) would otherwise route differently here
    and there. Each value's rank (how many come before it) is counted, and the k smallest
    ranks taken, ranks being distinct."""
    before = values[..., None, :] > values[..., :, None]  # [.., i, j]: j before i
    count = values.shape[-1]
    lower = torch.ones(count, count, dtype=torch.bool).tril(-1)  # j < i
    ties = (values[..., None, :] == values[..., :, None]) & lower
    rank = (before | ties).sum(-1)
    _, indices = torch.topk(-rank.float(), top_k, dim=-1)
    return torch.gather(values, -1, indices), indices


def softmax_then_top_k(logits: torch.Tensor, top_k: int, renormalize: bool):
    """Softmax over every expert (in fp32), then the k largest (ties to the lowest index);
    renormalised to sum to one if `renormalize` (Qwen3 MoE with `norm_topk_prob`,
    Mixtral)."""
    probabilities = torch.softmax(logits.float(), dim=-1)
    weights, indices = top_k_ties_to_lowest(probabilities, top_k)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, indices


def top_k_then_softmax(logits: torch.Tensor, top_k: int, renormalize: bool = True):
    """The k largest logits (ties to the lowest index), then a softmax over those
    (GPT-OSS)."""
    chosen, indices = top_k_ties_to_lowest(logits.float(), top_k)
    return torch.softmax(chosen, dim=-1), indices


ROUTINGS: dict[str, Callable] = {
    "softmax-top-k": softmax_then_top_k,
    "top-k-softmax": top_k_then_softmax,
}


class Expert(nn.Module):
    """One gated MLP, `down(act(gate(x)) * up(x))`, its projections under the names the
    checkpoint gives them (`names`: gate, up, down)."""

    def __init__(self, hidden: int, intermediate: int, names: tuple[str, str, str]) -> None:
        super().__init__()
        self.names = names
        gate, up, down = names
        setattr(self, gate, nn.Linear(hidden, intermediate, bias=False))
        setattr(self, up, nn.Linear(hidden, intermediate, bias=False))
        setattr(self, down, nn.Linear(intermediate, hidden, bias=False))

    def projections(self) -> tuple[nn.Module, nn.Module, nn.Module]:
        return tuple(getattr(self, name) for name in self.names)

    def forward(self, x: torch.Tensor, activation) -> torch.Tensor:
        gate, up, down = self.projections()
        return down(activation(gate(x)) * up(x))


class MixtureOfExperts(nn.Module):
    """The router (`router_name`, an nn.Linear to `experts` logits) and the experts."""

    def __init__(
        self,
        hidden: int,
        intermediate: int,
        experts: int,
        top_k: int,
        activation: Callable = nn.functional.silu,
        routing: str = "softmax-top-k",
        renormalize: bool = True,
        names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
        router_name: str = "gate",
        router_bias: bool = False,
        shared_intermediate: int | None = None,
    ) -> None:
        super().__init__()
        if routing not in ROUTINGS:
            raise ValueError(f"unknown routing {routing!r}; known: {list(ROUTINGS)}")
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k must be 1 to the {experts} experts, got {top_k}")
        self.top_k, self.count, self.activation = top_k, experts, activation
        self.routing, self.renormalize, self.router_name = routing, renormalize, router_name
        router = nn.Linear(hidden, experts, bias=router_bias)
        router.is_router = True  # kept float32 by every preset (zoo.core.compression.presets): its
        setattr(self, router_name, router)  # top-k choice is where 4-bit noise flips tokens
        self.formulation = "all"
        self.make_experts(hidden, intermediate, names)
        if shared_intermediate:  # Qwen3.5 MoE: one more expert every token takes, gated
            self.shared_expert = Expert(hidden, shared_intermediate, names)
            self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)
            self.shared_expert_gate.is_router = True  # one output: kept float32 too

    def make_experts(self, hidden: int, intermediate: int, names: tuple[str, str, str]) -> None:
        self.experts = nn.ModuleList(Expert(hidden, intermediate, names) for _ in range(self.count))

    def route(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's `top_k` expert weights and indices `[N, top_k]`, from fp32 logits."""
        logits = getattr(self, self.router_name)(flat)
        return ROUTINGS[self.routing](logits, self.top_k, self.renormalize)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weights, indices = self.route(flat)
        if self.formulation == "chosen":
            out = self._chosen_only(flat, weights, indices)
        else:
            out = self._every_expert(flat, weights, indices)
        if hasattr(self, "shared_expert"):  # weighted by its own sigmoid gate
            shared = self.shared_expert(flat, self.activation)
            out = out + torch.sigmoid(self.shared_expert_gate(flat)) * shared
        return out.reshape(shape)

    def _every_expert(self, flat, weights, indices) -> torch.Tensor:
        share = combine(weights, indices, self.count).to(flat.dtype)
        out = torch.zeros_like(flat)
        for number, expert in enumerate(self.experts):
            out = out + share[:, number : number + 1] * expert(flat, self.activation)
        return out

    def stack(self) -> None:
        """Switch to the `chosen` formulation: the experts' weights stacked once into a
        `StackedExperts` (`[experts, hidden, 2 * intermediate]`, gate then up, and
        `[experts, intermediate, hidden]`; the per-expert modules are dropped), which a
        preset then compresses stacked (`stack_experts`)."""
        if self.formulation == "chosen":
            return
        gates, ups, downs = zip(*(e.projections() for e in self.experts), strict=True)
        hidden, intermediate = gates[0].in_features, gates[0].out_features
        glu = functools.partial(gated, activation=self.activation)
        stacked = StackedExperts(self.count, hidden, intermediate, glu, bias=False, meta=True)
        with torch.no_grad():
            pairs = zip(gates, ups, strict=True)
            gate_up = torch.stack([torch.cat([g.weight, u.weight]).T for g, u in pairs])
            down = torch.stack([d.weight.T for d in downs])
        stacked.gate_up_proj = nn.Parameter(gate_up.contiguous(), requires_grad=False)
        stacked.down_proj = nn.Parameter(down.contiguous(), requires_grad=False)
        stacked.stack()
        del self.experts
        self.stacked, self.formulation = stacked, "chosen"

    def _chosen_only(self, flat, weights, indices) -> torch.Tensor:
        return self.stacked.compute(flat, weights, indices)


def stack_experts(model: nn.Module, compress: Callable | None = None) -> None:
    """Switch every mixture of experts in `model` to the chosen formulation (GatherMM):
    before the layout, which would re-store the per-expert projections. Experts published
    one module per expert are stacked here; `compress(name, module)`, if given, then
    stores each new stack (`zoo.core.compression.presets.Preset.compress_module`)."""
    for name, module in list(model.named_modules()):
        if isinstance(module, StackedExperts | StackedMixtureOfExperts):
            module.stack()  # stacked as published (and compressed so as it was read)
        elif isinstance(module, MixtureOfExperts) and module.formulation != "chosen":
            module.stack()
            if compress is not None:
                module.stacked = compress(f"{name}.stacked", module.stacked)


def gated(gate_up: torch.Tensor, activation: Callable) -> torch.Tensor:
    """The gated unit of stacked gate-then-up columns: `activation(gate) * up`."""
    gate, up = gate_up.chunk(2, dim=-1)
    return activation(gate) * up


def is_expert_projection(name: str) -> bool:
    """A projection of one expert published one module per expert (`...experts.3.w1`)."""
    import re

    return re.search(r"\.experts\.\d+\.", name) is not None


def experts_stored(model: nn.Module) -> str | None:
    """How a decoder stores its experts: "stacked" as published (`StackedExperts`,
    compressed stacked), "per-expert" (one module each, stacked for GatherMM after
    loading), or None: no mixture of experts."""
    modules = list(model.modules())
    if any(isinstance(m, StackedExperts) for m in modules):
        return "stacked"
    return "per-expert" if any(isinstance(m, MixtureOfExperts) for m in modules) else None


def clamped_swiglu(gate_up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """GPT-OSS's gated unit on interleaved gate and up columns: the gate clamped above at
    `limit`, the up at +-`limit`, `(up + 1) * gate * sigmoid(alpha * gate)`."""
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate, up = gate.clamp(max=limit), up.clamp(min=-limit, max=limit)
    return (up + 1) * gate * torch.sigmoid(gate * alpha)


class StackedExperts(nn.Module):
    """Experts stored stacked as published, under the checkpoint's names `gate_up_proj` and
    `down_proj` (and `gate_up_proj_bias`, `down_proj_bias` if `bias`):
    - GPT-OSS: `[experts, hidden, 2 * intermediate]` and `[experts, intermediate, hidden]`,
      `x @ w` per expert, gate and up interleaved (its `glu` splits them);
    - `transposed` (Gemma 4, transformers' own layout): `[experts, 2 * intermediate, hidden]`
      and `[experts, hidden, intermediate]`, `w @ x` per expert.

    They compute both formulations (`compute`): every expert weighted by the router (zero
    for those not chosen), or the chosen ones only with `GatherMM` (after `stack()`).
    `forward` runs every expert on `x` without routing; only the compression calls it:
    coreai-opt quantizes the weights it sees a matmul consume (`zoo.core.compression.stores`), in
    blocks of 32 inputs per expert and output (`IN_AXIS` says which axis holds inputs)."""

    COMPRESSED = ("gate_up_proj", "down_proj")

    def __init__(
        self,
        experts: int,
        hidden: int,
        intermediate: int,
        glu: Callable,
        bias: bool = True,
        transposed: bool = False,
        meta: bool = False,
    ) -> None:
        super().__init__()
        self.glu, self.count, self.transposed = glu, experts, transposed
        self.IN_AXIS = 2 if transposed else 1
        gate_up, down = (experts, hidden, 2 * intermediate), (experts, intermediate, hidden)
        if transposed:
            gate_up, down = (experts, 2 * intermediate, hidden), (experts, hidden, intermediate)
        device = "meta" if meta else None  # `meta`: filled by the caller (stacking)
        self.gate_up_proj = nn.Parameter(torch.zeros(gate_up, device=device))
        self.down_proj = nn.Parameter(torch.zeros(down, device=device))
        if bias:
            self.gate_up_proj_bias = nn.Parameter(torch.zeros(experts, 2 * intermediate))
            self.down_proj_bias = nn.Parameter(torch.zeros(experts, hidden))
        self.formulation = "all"

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Both weights as `[experts, in, out]` (`x @ w`)."""
        if self.transposed:
            return self.gate_up_proj.transpose(1, 2), self.down_proj.transpose(1, 2)
        return self.gate_up_proj, self.down_proj

    def biases(self) -> tuple[torch.Tensor | int, torch.Tensor | int]:
        return getattr(self, "gate_up_proj_bias", 0), getattr(self, "down_proj_bias", 0)

    def example_input(self, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(1, 1, self.weights()[0].shape[1], dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up_bias, _ = self.biases()
        if self.transposed:  # w @ x: the weight itself is what the matmul consumes
            gate_up = torch.matmul(self.gate_up_proj, x.transpose(-1, -2)).transpose(-1, -2)
            hidden = self.glu(gate_up).to(x.dtype)
            return torch.matmul(self.down_proj, hidden.transpose(-1, -2)).transpose(-1, -2)
        bias = gate_up_bias[:, None] if torch.is_tensor(gate_up_bias) else 0
        hidden = self.glu(torch.matmul(x, self.gate_up_proj) + bias)
        return torch.matmul(hidden.to(x.dtype), self.down_proj)  # (the biases may be wider)

    def stack(self) -> None:
        """Switch to the chosen formulation (GatherMM over the stacks as they are)."""
        if self.formulation == "chosen":
            return
        from coreai_torch.composite_ops import GatherMM

        self.gather_mm, self.formulation = GatherMM(num_batch_axes=1), "chosen"

    def compute(self, flat: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor):
        """`[N, hidden]`: the experts' outputs weighted by the router's `weights` for its
        `indices` `[N, top_k]`, in this module's formulation."""
        (gate_up, down), (gate_up_bias, down_bias) = self.weights(), self.biases()
        if self.formulation == "chosen":
            chosen, tokens, width = indices.to(torch.int32), *flat.shape
            lhs = flat.reshape(1, tokens, 1, 1, width)
            mixed = self.gather_mm(lhs, gate_up[None], rhs_indices=chosen)[0, :, :, 0]
            mixed = mixed + (gate_up_bias[chosen] if torch.is_tensor(gate_up_bias) else 0)
            hidden = self.glu(mixed)[None, :, :, None]  # [1, N, top_k, 1, intermediate]
            out = self.gather_mm(hidden, down[None], rhs_indices=chosen)[0, :, :, 0]
            out = out + (down_bias[chosen] if torch.is_tensor(down_bias) else 0)
            return (out * weights[..., None].to(out.dtype)).sum(dim=1)
        share = combine(weights, indices, self.count).to(flat.dtype)
        mixed = torch.einsum("nh,ehk->nek", flat, gate_up) + gate_up_bias
        out = torch.einsum("nei,eih->neh", self.glu(mixed), down) + down_bias
        return (out * share[..., None]).sum(dim=1)


def combine(weights: torch.Tensor, indices: torch.Tensor, count: int) -> torch.Tensor:
    """`[N, count]`: each token's weight for every expert, zero for those not chosen (a
    one-hot sum, not a scatter: no index written from data in the graph)."""
    chosen = indices[..., None] == torch.arange(count, device=indices.device)
    return (chosen.to(weights.dtype) * weights[..., None]).sum(dim=1)


class StackedMixtureOfExperts(MixtureOfExperts):
    """A router and experts published stacked (GPT-OSS, as transformers 5 saves it:
    `StackedExperts`); the gated unit is `glu(gate_up)`."""

    def __init__(self, hidden, intermediate, experts, top_k, glu, **options) -> None:
        self.glu = glu
        super().__init__(hidden, intermediate, experts, top_k, **options)

    def make_experts(self, hidden: int, intermediate: int, names) -> None:
        self.experts = StackedExperts(self.count, hidden, intermediate, self.glu)

    def _every_expert(self, flat, weights, indices) -> torch.Tensor:
        return self.experts.compute(flat, weights, indices)

    def stack(self) -> None:
        self.experts.stack()
        self.formulation = "chosen"

    def _chosen_only(self, flat, weights, indices) -> torch.Tensor:
        return self.experts.compute(flat, weights, indices)
