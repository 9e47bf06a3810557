"""Fused MoE grouped GEMM: each routed (token, slot) row times its expert's weight matrix.

out[t, j] = x[t] @ w[topk_ids[t, j]]^T for every token t and routing slot j, accumulated in fp32
and stored in bf16: the first GEMM of a MoE layer (the experts' fused gate_up projection) with
the routing gather folded in, as vLLM's and SGLang's fused_moe kernels compute it before the
activation. Routing weights are applied after the second GEMM, so they are not an input here.

With expert parallelism (DeepSeek-R1 here) a rank holds only some experts: ``topk_ids`` then holds
local expert ids, and -1 for slots routed to experts on other ranks, whose rows are zero (vLLM's
convention). The tokens given are the ones dispatched to this rank, so each has at least one local
expert.

Small token counts are memory-bound (every expert hit streams its whole weight matrix); prefill
counts are compute-bound.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(x: Any, w: Any, topk_ids: Any) -> Any:
    """out (tokens, top_k, N) in x's dtype: x[t] @ w[e]^T in fp32 per routed slot, zeros where e = -1."""
    import torch

    tokens, top_k = topk_ids.shape
    out = torch.zeros((tokens, top_k, w.shape[1]), dtype=x.dtype, device=x.device)
    ids = topk_ids.to(torch.int64)
    with exact_fp32_matmuls():
        for expert in torch.unique(ids[ids >= 0]).tolist():
            token, slot = torch.nonzero(ids == expert, as_tuple=True)
            out[token, slot] = (x[token].to(torch.float32) @ w[expert].to(torch.float32).T).to(x.dtype)
    return out


def routed_ids(tokens: int, experts: int, top_k: int, expert_parallel: int, generator: Any) -> Any:
    """Top-k expert ids per token, int32 (tokens, top_k), as a trained router would give them.

    Routing scores are N(0, 1) plus a per-expert popularity N(0, 0.25) over all
    ``experts * expert_parallel`` experts, so loads are uneven. This rank holds experts
    [0, experts); with expert parallelism the other experts' slots become -1 and each token (one
    dispatched here) is given a local expert in its last slot if it had none.
    """
    import torch

    global_experts = experts * expert_parallel
    popularity = 0.25 * torch.randn(global_experts, generator=generator)
    scores = torch.randn(tokens, global_experts, generator=generator) + popularity
    ids = torch.topk(scores, top_k, dim=-1).indices
    if expert_parallel > 1:
        local = ids < experts
        stranded = ~local.any(dim=-1)
        fallback = torch.randint(0, experts, (tokens,), generator=generator)
        ids[stranded, -1] = fallback[stranded]
        ids = torch.where(ids < experts, ids, torch.full_like(ids, -1))
    return ids.to(torch.int32)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x (tokens, hidden), w (experts, n, hidden) in ``dtype``, topk_ids (tokens, top_k) int32.

    x is N(0, 1) (a normalized hidden state); weights are N(0, 1) scaled by 1/sqrt(hidden), as
    trained projections are, so outputs are O(1).
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, hidden, n, experts = shape["tokens"], shape["hidden"], shape["n"], shape["experts"]
    x = torch.randn(tokens, hidden, generator=generator, dtype=torch_dtype)
    # Drawn directly in the storage dtype: the weights are up to a gigabyte.
    w = torch.randn(experts, n, hidden, generator=generator, dtype=torch_dtype).mul_(hidden**-0.5)
    ids = routed_ids(tokens, experts, int(params["top_k"]), int(params.get("expert_parallel", 1)), generator)
    return x.to(device), w.to(device), ids.to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x, the ids and the weights of the experts hit; write every output row. A lower bound.

    Which experts a batch hits depends on the routing, so the bound counts only the experts every
    batch must hit: top_k of them without expert parallelism (a token's k experts are distinct),
    one with it (each dispatched token has a local expert). FLOPs likewise count the rows that must
    be computed: tokens x top_k, or tokens with expert parallelism.
    """
    itemsize = dtype_bytes(dtype)
    tokens, hidden, n, experts = shape["tokens"], shape["hidden"], shape["n"], shape["experts"]
    top_k = int(params["top_k"])
    parallel = int(params.get("expert_parallel", 1)) > 1
    experts_hit = 1 if parallel else min(top_k, experts)
    computed_rows = tokens if parallel else tokens * top_k
    return Roofline(
        bytes_moved=(tokens * hidden + experts_hit * n * hidden + tokens * top_k * n) * itemsize + tokens * top_k * 4,
        flops=2 * computed_rows * n * hidden,
    )
