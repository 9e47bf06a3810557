"""DeepSeek-V3/R1 routing ("noaux_tc"): sigmoid scores, a choice bias, group-limited top-k.

Per token, from router logits (experts,) in fp32 (DeepSeek computes the gate in fp32):

1. scores = sigmoid(logits); choice = scores + e_score_correction_bias (the auxiliary-loss-free
   load-balancing bias, fp32, used for choosing only).
2. The experts form ``n_group`` equal groups; a group's score is the sum of its two best choice
   scores; the ``topk_group`` best groups are kept.
3. The ``top_k`` experts with the best choice scores inside the kept groups are picked.
4. Their weights are their *unbiased* scores, divided by their sum, times
   ``routed_scaling_factor``.

Sources: DeepSeek-V3 inference/model.py (Gate.forward), transformers' DeepseekV3TopkRouter, vLLM's
grouped_topk. Experts outside the kept groups are excluded as -inf (DeepSeek and vLLM; transformers
writes 0.0, which is the same here because every choice score is positive). The result is returned
best choice score first.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline
from apex_core.kernels import seeded

DECISION_MARGIN = 2e-5
"""Least gap, in the choice scores (about 5 with DeepSeek's biases, fp32 ulp 5e-7) and the group
scores (about 10), at every decision: the kept groups against the next one, and the top k + 1
experts against each other. Rounding in a correct fp32 kernel stays far below it."""


def reference_torch(
    router_logits: Any,
    e_score_correction_bias: Any,
    top_k: int,
    n_group: int,
    topk_group: int,
    routed_scaling_factor: float,
) -> tuple[Any, Any]:
    """(weights float32, ids int32), each (tokens, top_k), in descending choice-score order."""
    import torch

    scores = router_logits.to(torch.float32).sigmoid()
    choice = scores + e_score_correction_bias.to(torch.float32)
    tokens, experts = choice.shape
    grouped = choice.view(tokens, n_group, experts // n_group)
    group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
    kept_groups = group_scores.topk(topk_group, dim=-1).indices
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept_groups, True)
    allowed = group_mask.unsqueeze(-1).expand_as(grouped).reshape(tokens, experts)
    ids = choice.masked_fill(~allowed, float("-inf")).topk(top_k, dim=-1, sorted=True).indices
    weights = scores.gather(1, ids)
    weights = weights / weights.sum(dim=-1, keepdim=True) * routed_scaling_factor
    return weights, ids.to(torch.int32)


def _near_tie_rows(logits: Any, bias: Any, top_k: int, n_group: int, topk_group: int) -> Any:
    """Rows where a routing decision is within DECISION_MARGIN (judged in float64)."""
    import torch

    choice = torch.sigmoid(logits.to(torch.float64)) + bias.to(torch.float64)
    tokens, experts = choice.shape
    grouped = choice.view(tokens, n_group, experts // n_group)
    group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
    ranked_groups = group_scores.sort(dim=-1, descending=True)
    if topk_group < n_group:
        group_gap = ranked_groups.values[:, topk_group - 1] - ranked_groups.values[:, topk_group]
    else:  # every group is kept (Kimi K2: one group): no group decision to keep clear of ties
        group_gap = torch.full((tokens,), float("inf"), dtype=choice.dtype)
    kept = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, ranked_groups.indices[:, :topk_group], True)
    allowed = kept.unsqueeze(-1).expand_as(grouped).reshape(tokens, experts)
    top = choice.masked_fill(~allowed, float("-inf")).topk(top_k + 1, dim=-1).values
    expert_gap = (top[:, :-1] - top[:, 1:]).min(dim=-1).values
    return (group_gap < DECISION_MARGIN) | (expert_gap < DECISION_MARGIN)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """Router logits (tokens, experts) fp32, the bias (experts,) fp32, and the routing constants.

    Logits are N(-2.5, 1.5) plus a per-expert offset N(0, 0.3) (popular and unpopular experts), so
    the picked experts' scores spread over roughly 0.4-0.9 and their weights differ; the
    bias sits near 5 with a spread of 0.05, as DeepSeek-V3's trained e_score_correction_bias
    (positive, around 2-6, nearly equal across experts). Rows with a near-tied decision are
    redrawn.
    """
    import torch

    generator = seeded.generator(seed)
    tokens, experts = shape["tokens"], shape["experts"]
    top_k, n_group, topk_group = int(params["top_k"]), int(params["n_group"]), int(params["topk_group"])
    popularity = 0.3 * torch.randn(experts, generator=generator)
    bias = (5.0 + 0.05 * torch.randn(experts, generator=generator)).to(torch.float32)
    logits = 1.5 * torch.randn(tokens, experts, generator=generator) - 2.5 + popularity
    for _ in range(100):
        redraw = _near_tie_rows(logits, bias, top_k, n_group, topk_group)
        count = int(redraw.sum())
        if count == 0:
            break
        logits[redraw] = 1.5 * torch.randn(count, experts, generator=generator) - 2.5 + popularity
    return (
        logits.to(torch.float32).to(device),
        bias.to(device),
        top_k,
        n_group,
        topk_group,
        float(params["routed_scaling_factor"]),
    )


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read the logits and the bias; write k weights and k ids per token.

    FLOPs: sigmoid and bias (about 6 per logit), the group sums, one comparison per logit per
    selected expert, and the normalization.
    """
    tokens, experts = shape["tokens"], shape["experts"]
    top_k = int(params["top_k"])
    return Roofline(
        bytes_moved=tokens * experts * 4 + experts * 4 + tokens * top_k * (4 + 4),
        flops=tokens * (6 * experts + experts * top_k + 3 * top_k),
    )
