"""Baseline DeepSeek-V3/R1 router (sigmoid, correction bias, group-limited top-k) in Triton.

One program per token, each step as the reference states it: sigmoid, add the bias, view the
experts as (n_group, experts per group), sum each group's two best choice scores (max, argmax,
mask, max), keep the topk_group best groups by repeated argmax, mask the other groups' experts to
-inf, pick the top k experts by repeated argmax, gather their unbiased scores, normalize and
scale. Correct and simple, with the headroom a direct translation leaves: one token per program,
default warps, two reductions (max and argmax) per selection round. A group whose size is not a
power of two (Kimi K2: one group of 384 experts) is padded to one with -inf choice scores.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_topk_row_kernel(
    logits_ptr,
    bias_ptr,
    weights_ptr,
    ids_ptr,
    logits_row_stride,
    routed_scaling_factor,
    N_EXPERTS: tl.constexpr,
    N_GROUP: tl.constexpr,
    TOPK_GROUP: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_G: tl.constexpr,
):
    GROUP_SIZE: tl.constexpr = N_EXPERTS // N_GROUP
    row = tl.program_id(0)
    # Experts as (N_GROUP, BLOCK_G): each group's columns, padded to a power of two.
    groups = tl.arange(0, N_GROUP)
    in_group = tl.arange(0, BLOCK_G)
    real = (groups[:, None] >= 0) & (in_group[None, :] < GROUP_SIZE)
    cols = groups[:, None] * GROUP_SIZE + in_group[None, :]
    logits = tl.load(logits_ptr + row * logits_row_stride + cols, mask=real, other=0.0)
    scores = tl.sigmoid(logits)
    grouped = tl.where(real, scores + tl.load(bias_ptr + cols, mask=real, other=0.0), float("-inf"))

    # Group score: the sum of the two best choice scores of each group.
    first = tl.max(grouped, axis=1)
    first_at = tl.argmax(grouped, axis=1)
    second = tl.max(tl.where(in_group[None, :] == first_at[:, None], float("-inf"), grouped), axis=1)
    group_scores = first + second

    # Keep the TOPK_GROUP best groups.
    kept = groups < 0
    for _ in tl.static_range(TOPK_GROUP):
        best_group = tl.argmax(group_scores, axis=0)
        kept = kept | (groups == best_group)
        group_scores = tl.where(groups == best_group, float("-inf"), group_scores)
    allowed = tl.where(kept[:, None], grouped, float("-inf"))
    work = tl.reshape(allowed, (N_GROUP * BLOCK_G,))
    flat_scores = tl.reshape(scores, (N_GROUP * BLOCK_G,))
    lanes = tl.arange(0, N_GROUP * BLOCK_G)

    # Top k experts among the kept groups, weighted by their unbiased scores.
    slots = tl.arange(0, BLOCK_K)
    picked_scores = tl.zeros([BLOCK_K], dtype=tl.float32)
    picked_ids = tl.zeros([BLOCK_K], dtype=tl.int32)
    for k in tl.static_range(TOP_K):
        best_lane = tl.argmax(work, axis=0)
        best_id = (best_lane // BLOCK_G) * GROUP_SIZE + best_lane % BLOCK_G
        best_score = tl.sum(tl.where(lanes == best_lane, flat_scores, 0.0), axis=0)
        picked_scores = tl.where(slots == k, best_score, picked_scores)
        picked_ids = tl.where(slots == k, best_id, picked_ids)
        work = tl.where(lanes == best_lane, float("-inf"), work)

    slot_mask = slots < TOP_K
    total = tl.sum(tl.where(slot_mask, picked_scores, 0.0), axis=0)
    weights = picked_scores / total * routed_scaling_factor
    tl.store(weights_ptr + row * TOP_K + slots, weights, mask=slot_mask)
    tl.store(ids_ptr + row * TOP_K + slots, picked_ids, mask=slot_mask)


def moe_router(
    router_logits: torch.Tensor,
    e_score_correction_bias: torch.Tensor,
    top_k: int,
    n_group: int,
    topk_group: int,
    routed_scaling_factor: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, n_experts = router_logits.shape
    logits = router_logits if router_logits.stride(-1) == 1 else router_logits.contiguous()
    weights = torch.empty((tokens, top_k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((tokens, top_k), dtype=torch.int32, device=logits.device)
    if tokens == 0:
        return weights, ids
    _grouped_topk_row_kernel[(tokens,)](
        logits,
        e_score_correction_bias.contiguous(),
        weights,
        ids,
        logits.stride(0),
        routed_scaling_factor,
        N_EXPERTS=n_experts,
        N_GROUP=n_group,
        TOPK_GROUP=topk_group,
        TOP_K=top_k,
        BLOCK_K=triton.next_power_of_2(top_k),
        BLOCK_G=triton.next_power_of_2(n_experts // n_group),
    )
    return weights, ids
