"""A whole MoE layer with always-on shared experts: routed experts plus the shared expert, combined.

out[t] = s * sum_j w[t, j] * E_{ids[t, j]}(x[t]) + g(t) * S(x[t]), where each expert E_e and the
shared expert S is a SwiGLU MLP (gate_up projection, silu(gate) * up, down projection), s is the
model's routed_scaling_factor (DeepSeek-V3/R1 2.5, Kimi K2 2.827, 1 for Qwen3.5) and g(t) is 1 for
DeepSeek's ungated shared expert and sigmoid(x[t] . shared_gate) for Qwen3.5's (transformers'
Qwen3_5MoeSparseMoeBlock: ``sigmoid(shared_expert_gate(x)) * shared_expert(x)`` added to the
routed sum). The router has already run: top-k ids and their weights are inputs.

The reference rounds where every serving kernel rounds (the gate_up output, the activation and
each slot's down output are stored in bf16 between launches) and sums the slots in fp32, so the
tolerance only has to cover kernels that round in fewer places. Each GEMM step is the family's
``reference_torch`` (a routed slot's row times its expert's weights), reused rather than copied.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels import seeded
from apex_core.kernels.fused_moe import reference_torch as grouped_gemm_torch
from apex_core.kernels.fused_moe import routed_ids
from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline, dtype_bytes


def _swiglu_experts(x: Any, w13: Any, w2: Any, ids: Any) -> Any:
    """(tokens, slots, hidden) in x's dtype: each slot's expert MLP, rounded to x's dtype per step."""
    import torch

    tokens, slots = ids.shape
    gate_up = grouped_gemm_torch(x, w13, ids).to(torch.float32)
    n = gate_up.shape[-1] // 2
    act = (torch.nn.functional.silu(gate_up[..., :n]) * gate_up[..., n:]).to(x.dtype)
    down = grouped_gemm_torch(act.reshape(tokens * slots, n), w2, ids.reshape(tokens * slots, 1))
    return down.reshape(tokens, slots, -1)


def reference_torch(
    x: Any,
    w13: Any,
    w2: Any,
    topk_ids: Any,
    topk_weights: Any,
    shared_w13: Any,
    shared_w2: Any,
    shared_gate: Any,
    routed_scaling_factor: float,
) -> Any:
    """out (tokens, hidden) in x's dtype: scaled weighted routed sum plus the (gated) shared expert."""
    import torch

    routed = _swiglu_experts(x, w13, w2, topk_ids).to(torch.float32)
    routed_sum = (routed * topk_weights.to(torch.float32)[..., None]).sum(dim=1) * routed_scaling_factor
    shared_ids = torch.zeros((x.shape[0], 1), dtype=torch.int32, device=x.device)
    shared = _swiglu_experts(x, shared_w13[None], shared_w2[None], shared_ids)[:, 0].to(torch.float32)
    if shared_gate is not None:
        with exact_fp32_matmuls():
            shared = shared * torch.sigmoid(x.to(torch.float32) @ shared_gate.to(torch.float32).T)
    return (routed_sum + shared).to(x.dtype)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x, w13 (experts, 2n, hidden), w2 (experts, hidden, n), topk_ids, topk_weights (fp32, each
    token's summing to 1 as DeepSeek's and Qwen3.5's renormalized top-k do), shared_w13
    (2 shared_n, hidden), shared_w2 (hidden, shared_n), shared_gate ((1, hidden), or None where the
    model's shared expert is ungated) and routed_scaling_factor.

    Weights are N(0, 1) over sqrt(fan-in), as trained projections are, so every step is O(1).
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, hidden, n, experts = shape["tokens"], shape["hidden"], shape["n"], shape["experts"]
    shared_n = shape["shared_n"]
    top_k = int(params["top_k"])

    def weight(*size: int) -> Any:
        # Drawn directly in the storage dtype: the routed weights are gigabytes.
        return torch.randn(*size, generator=generator, dtype=torch_dtype).mul_(size[-1] ** -0.5)

    x = torch.randn(tokens, hidden, generator=generator, dtype=torch_dtype)
    w13 = weight(experts, 2 * n, hidden)
    w2 = weight(experts, hidden, n)
    ids = routed_ids(tokens, experts, top_k, 1, generator)
    weights = torch.softmax(torch.randn(tokens, top_k, generator=generator), dim=-1)
    shared_w13 = weight(2 * shared_n, hidden)
    shared_w2 = weight(hidden, shared_n)
    gate = weight(1, hidden).to(device) if params.get("shared_gate", False) else None
    tensors = (x, w13, w2, ids, weights, shared_w13, shared_w2)
    return (*(t.to(device) for t in tensors), gate, float(params.get("routed_scaling_factor", 1.0)))


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x, the shared expert's and the hit experts' weights once, write the output. A lower bound.

    As for the family's gate_up roofline, only the top_k experts every batch must hit are counted
    (a token's k experts are distinct); FLOPs are the three projections of every routed slot and
    of the shared expert, per token.
    """
    itemsize = dtype_bytes(dtype)
    tokens, hidden, n, experts = shape["tokens"], shape["hidden"], shape["n"], shape["experts"]
    shared_n = shape["shared_n"]
    top_k = int(params["top_k"])
    experts_hit = min(top_k, experts)
    gate = hidden if params.get("shared_gate", False) else 0
    weight_elements = experts_hit * 3 * n * hidden + 3 * shared_n * hidden + gate
    return Roofline(
        bytes_moved=(2 * tokens * hidden + weight_elements) * itemsize + tokens * top_k * 8,
        flops=2 * tokens * 3 * hidden * (top_k * n + shared_n),
    )
