"""GPT-OSS routing: the top-k router logits of each token and a softmax over those k.

As in OpenAI's reference implementation (gpt_oss/torch/model.py, MLPBlock.forward): ``torch.topk``
of the router logits (sorted), then ``softmax`` over the selected values. vLLM computes the same
weights as a softmax over all experts renormalized over the top-k; both are the same function.
The logits are fp32 (the router's output promoted before routing), so ids are a pure comparison.

It reads the logits once and writes two small outputs: memory-bound, and at decode sizes bound by
latency, not bytes.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline
from apex_core.kernels import seeded

DECISION_MARGIN = 2e-5
"""Least gap between consecutive logits among each token's top k + 1: far above fp32 rounding
(about 1e-6 at these magnitudes), so an exact comparison of ids is fair to any correct kernel."""


def reference_torch(router_logits: Any, top_k: int) -> tuple[Any, Any]:
    """(weights float32, ids int32), each (tokens, top_k), in descending logit order."""
    import torch

    values, ids = torch.topk(router_logits.to(torch.float32), top_k, dim=-1, sorted=True)
    weights = torch.softmax(values, dim=-1)
    return weights, ids.to(torch.int32)


def _near_tie_rows(logits: Any, top_k: int) -> Any:
    """Rows whose top k + 1 logits have two within DECISION_MARGIN of each other."""
    import torch

    top = torch.topk(logits.to(torch.float64), min(top_k + 1, logits.shape[-1]), dim=-1).values
    return ((top[:, :-1] - top[:, 1:]) < DECISION_MARGIN).any(dim=-1)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """Router logits (tokens, experts) float32 with a realistic spread, and top_k.

    Logits are N(0, 2) plus a per-expert offset N(0, 0.5), so some experts are more popular than
    others as in trained routers; rows with near-tied top logits are redrawn.
    """
    import torch

    generator = seeded.generator(seed)
    tokens, experts = shape["tokens"], shape["experts"]
    top_k = int(params["top_k"])
    popularity = 0.5 * torch.randn(experts, generator=generator)
    logits = 2.0 * torch.randn(tokens, experts, generator=generator) + popularity
    for _ in range(100):
        redraw = _near_tie_rows(logits, top_k)
        count = int(redraw.sum())
        if count == 0:
            break
        logits[redraw] = 2.0 * torch.randn(count, experts, generator=generator) + popularity
    return logits.to(torch.float32).to(device), top_k


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read the fp32 logits; write k fp32 weights and k int32 ids per token.

    FLOPs: one comparison per logit per selected expert plus the softmax over k (a few per k).
    """
    tokens, experts = shape["tokens"], shape["experts"]
    top_k = int(params["top_k"])
    return Roofline(
        bytes_moved=tokens * experts * 4 + tokens * top_k * (4 + 4),
        flops=tokens * (experts * top_k + 4 * top_k),
    )
