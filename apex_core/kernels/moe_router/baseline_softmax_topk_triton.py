"""Baseline GPT-OSS router in Triton, written the way inference stacks commonly write it.

One program per token: load the row of router logits, take the softmax over all experts, pick the
top k by k rounds of argmax (masking each winner), and renormalize the k picked probabilities
(vLLM's topk_softmax + renormalize, which equals a softmax over the top-k logits). Correct for any
expert count, with the headroom a simple kernel leaves: one token per program, default warps,
a full softmax before the selection, and two reductions (max, then argmax) per round.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax_row_kernel(
    logits_ptr,
    weights_ptr,
    ids_ptr,
    logits_row_stride,
    n_experts,
    TOP_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_E)
    mask = cols < n_experts
    logits = tl.load(logits_ptr + row * logits_row_stride + cols, mask=mask, other=float("-inf"))

    # Softmax over every expert.
    shifted = logits - tl.max(logits, axis=0)
    numerator = tl.where(mask, tl.exp(shifted), 0.0)
    probs = numerator / tl.sum(numerator, axis=0)

    # Top k by repeated argmax; a picked expert is masked out with -1 (probabilities are >= 0).
    slots = tl.arange(0, BLOCK_K)
    picked_probs = tl.zeros([BLOCK_K], dtype=tl.float32)
    picked_ids = tl.zeros([BLOCK_K], dtype=tl.int32)
    work = tl.where(mask, probs, -1.0)
    for k in tl.static_range(TOP_K):
        best = tl.max(work, axis=0)
        best_id = tl.argmax(work, axis=0)
        picked_probs = tl.where(slots == k, best, picked_probs)
        picked_ids = tl.where(slots == k, best_id, picked_ids)
        work = tl.where(cols == best_id, -1.0, work)

    # Renormalize over the picked experts.
    slot_mask = slots < TOP_K
    total = tl.sum(tl.where(slot_mask, picked_probs, 0.0), axis=0)
    tl.store(weights_ptr + row * TOP_K + slots, picked_probs / total, mask=slot_mask)
    tl.store(ids_ptr + row * TOP_K + slots, picked_ids, mask=slot_mask)


def moe_router(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, n_experts = router_logits.shape
    logits = router_logits if router_logits.stride(-1) == 1 else router_logits.contiguous()
    weights = torch.empty((tokens, top_k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((tokens, top_k), dtype=torch.int32, device=logits.device)
    if tokens == 0:
        return weights, ids
    _topk_softmax_row_kernel[(tokens,)](
        logits,
        weights,
        ids,
        logits.stride(0),
        n_experts,
        TOP_K=top_k,
        BLOCK_E=triton.next_power_of_2(n_experts),
        BLOCK_K=triton.next_power_of_2(top_k),
    )
    return weights, ids
