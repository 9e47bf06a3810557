"""Baseline top-k / top-p sampling in Triton: plain and correct, with a lot of headroom.

One program per row walks the row's vocabulary in blocks of 1024, once per question it asks:

1. the largest scaled logit z (soft-cap, then temperature);
2. top-k: a bisection over the 2^32 ordered fp32 bit patterns for the k-th largest logit (the
   soft-cap and the temperature are increasing, so it is the k-th largest z), counting the tokens
   at or above the midpoint with one pass each (up to 32 passes, fewer where a midpoint has exactly
   k above it; skipped where top_k >= vocab);
3. the softmax's sum over the top-k set;
4. top-p: a bisection over the bit patterns of e = exp(z - max) (non-negative, so the bits are
   ordered) for the least e whose more-probable mass is below top_p · sum (up to 32 passes, fewer
   once no token lies between the bounds; skipped where top_p >= 1), which also gives the kept mass;
5. write e / kept mass (0 outside the kept set), and race probs / q for the sampled token.

Sorting-free and exact up to the fp32 sums, but 30 to 70 passes over every row, one program per
row whatever the batch, and default warps.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scaled(x, temperature, SOFTCAP: tl.constexpr):
    """z = softcap · tanh(x / softcap) / temperature, tanh written with exp."""
    if SOFTCAP > 0:
        x = SOFTCAP * (2.0 / (1.0 + tl.exp(-2.0 * x / SOFTCAP)) - 1.0)
    return x / temperature


@triton.jit
def _ordered_key(z):
    """An int32 whose signed order is z's order (negative floats have their magnitude bits flipped)."""
    bits = z.to(tl.int32, bitcast=True)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _top_k_top_p_row_kernel(
    logits_ptr, temperature_ptr, top_k_ptr, top_p_ptr, q_ptr, probs_ptr, token_ptr,
    logits_row_stride, q_row_stride, probs_row_stride, vocab,
    SOFTCAP: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    logits_row = logits_ptr + row * logits_row_stride
    temperature = tl.load(temperature_ptr + row)
    top_k = tl.load(top_k_ptr + row)
    top_p = tl.load(top_p_ptr + row)
    cols = tl.arange(0, BLOCK)

    # 1. The largest z.
    z_max = float("-inf")
    for start in range(0, vocab, BLOCK):
        mask = start + cols < vocab
        z = _scaled(tl.load(logits_row + start + cols, mask=mask, other=0.0), temperature, SOFTCAP)
        z_max = tl.maximum(z_max, tl.max(tl.where(mask, z, float("-inf")), axis=0))

    # 2. Top-k: the largest key t with count(key >= t) >= k, by bisection (int64 bounds, no overflow).
    k_key = tl.full((), -2147483648, tl.int64)
    if top_k < vocab:
        lo = tl.full((), -2147483648, tl.int64)  # count(key >= lo) = vocab >= k
        hi = tl.full((), 2147483648, tl.int64)  # count(key >= hi) = 0 < k
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            count = 0
            for start in range(0, vocab, BLOCK):
                mask = start + cols < vocab
                key = _ordered_key(tl.load(logits_row + start + cols, mask=mask, other=0.0)).to(tl.int64)
                count += tl.sum((mask & (key >= mid)).to(tl.int32), axis=0)
            if count >= top_k:
                lo = mid
            else:
                hi = mid
            if count == top_k:  # exactly k at or above mid: that is the top-k set
                hi = lo + 1
        k_key = lo

    # 3. The softmax's sum over the top-k set.
    total = 0.0
    for start in range(0, vocab, BLOCK):
        mask = start + cols < vocab
        x = tl.load(logits_row + start + cols, mask=mask, other=0.0)
        z = _scaled(x, temperature, SOFTCAP)
        keep = mask & (_ordered_key(x).to(tl.int64) >= k_key)
        total += tl.sum(tl.where(keep, tl.exp(z - z_max), 0.0), axis=0)

    # 4. Top-p: the least key t of e with mass(e with key > t) < p · total; keep e at or above it.
    p_key = tl.full((), 0, tl.int64)
    kept_mass = total
    if top_p < 1.0:
        lo = tl.full((), -1, tl.int64)  # mass(key > -1) = total >= p · total
        hi = tl.full((), 0x3F800000, tl.int64)  # the key of 1.0, the largest e: mass above it is 0
        lo_mass = total
        lo_count = vocab  # tokens with key > lo (outside the top-k set e = 0, whose key is 0)
        hi_count = 0
        # Until no token lies between lo and hi: then the kept set is key > lo, whatever t is.
        while (hi - lo > 1) & (lo_count > hi_count):
            mid = lo + (hi - lo) // 2
            mass = 0.0
            count = 0
            for start in range(0, vocab, BLOCK):
                mask = start + cols < vocab
                x = tl.load(logits_row + start + cols, mask=mask, other=0.0)
                z = _scaled(x, temperature, SOFTCAP)
                keep = mask & (_ordered_key(x).to(tl.int64) >= k_key)
                e = tl.where(keep, tl.exp(z - z_max), 0.0)
                above = mask & (e.to(tl.int32, bitcast=True).to(tl.int64) > mid)
                mass += tl.sum(tl.where(above, e, 0.0), axis=0)
                count += tl.sum(above.to(tl.int32), axis=0)
            if mass < top_p * total:
                hi = mid
                hi_count = count
            else:
                lo = mid
                lo_mass = mass
                lo_count = count
        p_key = lo + 1
        kept_mass = lo_mass  # mass(key > lo)

    # 5. Write the kept probabilities and race probs / q.
    best = -1.0
    best_index = 0
    for start in range(0, vocab, BLOCK):
        mask = start + cols < vocab
        x = tl.load(logits_row + start + cols, mask=mask, other=0.0)
        z = _scaled(x, temperature, SOFTCAP)
        keep = mask & (_ordered_key(x).to(tl.int64) >= k_key)
        e = tl.where(keep, tl.exp(z - z_max), 0.0)
        keep = keep & (e.to(tl.int32, bitcast=True).to(tl.int64) >= p_key)
        probs = tl.where(keep, e / kept_mass, 0.0)
        tl.store(probs_ptr + row * probs_row_stride + start + cols, probs, mask=mask)
        q = tl.load(q_ptr + row * q_row_stride + start + cols, mask=mask, other=1.0)
        ratio = tl.where(keep, probs / q, -1.0)
        block_best = tl.max(ratio, axis=0)
        if block_best > best:
            best = block_best
            best_index = start + tl.argmax(ratio, axis=0)
    tl.store(token_ptr + row, best_index.to(tl.int64))


def top_k_top_p_sampling(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                         exponential: torch.Tensor, softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    batch, vocab = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    if exponential.stride(-1) != 1:
        exponential = exponential.contiguous()
    probs = torch.empty((batch, vocab), dtype=torch.float32, device=logits.device)
    token = torch.empty((batch,), dtype=torch.int64, device=logits.device)
    if batch == 0:
        return probs, token
    _top_k_top_p_row_kernel[(batch,)](
        logits, temperature, top_k, top_p, exponential, probs, token,
        logits.stride(0), exponential.stride(0), probs.stride(0), vocab,
        SOFTCAP=float(softcap), BLOCK=1024,
    )
    return probs, token
