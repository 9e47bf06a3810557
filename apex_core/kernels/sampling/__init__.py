"""Top-k / top-p sampling, the last step of every decode: from the lm_head's fp32 logits to the
renormalized probabilities of the tokens a request may still draw, and the token it draws.

Per row (one request), as vLLM's v1 sampler applies them (``apply_top_k_top_p``, then the
exponential race of ``random_sample``):

1. soft-cap (Gemma 2's ``final_logit_softcapping``, task param ``softcap``; 0 = off):
   z = cap · tanh(logit / cap), else z = logit;
2. temperature: z / temperature[row];
3. top-k: keep the tokens whose z is at least the k-th largest (top_k[row] = vocab: off);
4. top-p: over the softmax of the kept z, keep the most probable tokens whose mass, not counting
   the token itself, is below top_p[row] (the token that crosses p is kept; top_p = 1.0: off);
5. probs = softmax over the kept tokens, exactly 0 elsewhere (fp32);
6. token = argmax(probs / q) for q a given Exponential(1) draw per element: a sample from probs
   (the "exponential race", Gumbel-max in another form), int64 as vLLM returns it.

The reference works in float64 with stable sorts, so its only rounding is the final cast to fp32.
Ties and near-ties decide which tokens are kept and which wins the race, and there a correct fp32
kernel could differ from the reference; the input generator therefore leaves a clear margin at
every decision (``LOGIT_GAP`` at the top-k boundary and after the top-p boundary token, ``MASS_GAP``
between top_p and the kept mass, ``RACE_MARGIN`` between the race's winner and runner-up), so the
kept set, and with it the token id, is the same for every kernel that rounds like fp32 does.
"""

from __future__ import annotations

import math
from typing import Any

from apex_core.kernels import seeded
from apex_core.kernels.roofline import Roofline

__all__ = ["make_inputs_torch", "reference_torch", "roofline"]

LOGIT_GAP = 1e-3
"""Least gap, in scaled logits (after soft-cap and temperature), between the k-th and (k+1)-th
largest, and between the top-p boundary token and the next: fp32 rounding of a scaled logit of
|z| <= 60 is below 4e-6 (the soft-cap's exp form adds about cap · 1e-7), 250 times less."""
MASS_GAP = 1e-4
"""Least distance of top_p from the exclusive mass of the last kept token and of the first dropped
one: an fp32 sum of 256k probabilities is off by about 1e-6 (relative), 100 times less."""
RACE_MARGIN = 1e-3
"""Least relative lead of the race's winner (probs / q) over the runner-up: fp32 probabilities
differ from the reference by under 1e-5 (relative)."""
RACE_MIN_PROB = 1e-5
"""Least probability of the race's winner: under top_p = 1.0 a kernel that still sums the mass in
fp32 may drop tail tokens of probability ~1e-7; the winner is never one of them."""
TEMPERATURE_RANGE = (0.5, 1.5)
TOP_K_MAX = 1024
FLOPS_PER_ELEMENT = 12
"""Soft-cap (exp, add, divide, two multiplies), temperature, exp, compare, normalize, and the race's
divide and compare: about a dozen per logit, memory-bound at any batch."""


def _scaled(logits: Any, temperature: Any, softcap: float) -> Any:
    """z in float64: soft-capped (when softcap > 0), then divided by each row's temperature."""
    import torch

    z = logits.to(torch.float64)
    if softcap > 0:
        z = softcap * torch.tanh(z / softcap)
    return z / temperature.to(torch.float64)[:, None]


def _keep_top_k(z: Any, top_k: Any) -> Any:
    """Tokens at or above each row's k-th largest z."""
    import torch

    ordered = torch.sort(z, dim=-1, descending=True, stable=True).values
    kth = ordered.gather(1, (top_k.to(torch.int64).clamp(1, z.shape[-1]) - 1)[:, None])
    return z >= kth


def _top_k_probs(z: Any, top_k: Any) -> Any:
    import torch

    return torch.softmax(torch.where(_keep_top_k(z, top_k), z, float("-inf")), dim=-1)


def _keep_top_p(probs: Any, top_p: Any) -> Any:
    """Tokens whose more-probable mass (exclusive) is below top_p; every token where top_p >= 1."""
    import torch

    ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    above = torch.cumsum(ordered, dim=-1) - ordered
    p = top_p.to(torch.float64)[:, None]
    keep_sorted = (above < p) | (p >= 1.0)
    return torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted) & (probs > 0)


def _kept_probs(z: Any, top_k: Any, top_p: Any) -> Any:
    """Steps 3-5: the softmax over the tokens top-k and then top-p keep, 0 elsewhere (float64)."""
    import torch

    probs = _top_k_probs(z, top_k)
    kept = torch.where(_keep_top_p(probs, top_p), probs, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def reference_torch(logits: Any, temperature: Any, top_k: Any, top_p: Any, exponential: Any,
                    softcap: float) -> tuple[Any, Any]:
    """(probs float32 (batch, vocab), token int64 (batch,)), computed in float64."""
    import torch

    kept = _kept_probs(_scaled(logits, temperature, softcap), top_k, top_p)
    token = torch.argmax(kept / exponential.to(torch.float64), dim=-1)
    return kept.to(torch.float32), token


# --- inputs ------------------------------------------------------------------------------------


def _draw_logits(batch: int, vocab: int, softcap: float, generator: Any) -> Any:
    """Logits shaped like a trained LM's: a Gaussian bulk (sd 2, whose exp sums to about
    vocab · e^2) and a head of 1 to 8 tokens within 3 of that sum's log, so the top token takes
    5% to 95% of the mass at temperature 1 and the tail is long. Under a soft-cap the head is drawn
    after the cap (cap · atanh(level / cap) before it), so capping bends it by 4% to 10%."""
    import torch

    logits = 2.0 * torch.randn(batch, vocab, generator=generator)
    heads = torch.randint(1, 9, (batch,), generator=generator)
    for row in range(batch):
        size = min(int(heads[row]), vocab)
        ids = torch.randperm(vocab, generator=generator)[:size]
        level = math.log(vocab) + 2.0 + 6.0 * torch.rand(size, generator=generator) - 3.0
        if softcap > 0:
            level = softcap * torch.atanh((level / softcap).clamp(max=0.99))
        logits[row, ids] = level
    return logits


def _pattern(batch: int, vocab: int, generator: Any) -> tuple[Any, Any]:
    """top_k and a top_p target per row, cycling over four kinds of request so every batch of four
    rows or more has each: (top-k and top-p), (top-p alone), (top-k alone), (greedy top_k = 1, or
    neither filter). top_k is log-uniform in [2, 1024] where on; top_p uniform in (0.5, 1)."""
    import torch

    k_draw = torch.exp(math.log(2) + (math.log(TOP_K_MAX) - math.log(2)) * torch.rand(batch, generator=generator))
    k_draw = k_draw.round().to(torch.int64).clamp(1, vocab)
    p_draw = 0.5 + 0.5 * torch.rand(batch, generator=generator, dtype=torch.float64)
    rows = torch.arange(batch)
    kind = rows % 4
    greedy = (kind == 3) & ((rows // 4) % 2 == 0)
    top_k = torch.where((kind == 0) | (kind == 2), k_draw, torch.full_like(k_draw, vocab))
    top_k = torch.where(greedy, torch.ones_like(top_k), top_k)
    top_p = torch.where((kind == 2) | ((kind == 3) & ~greedy), torch.ones_like(p_draw), p_draw)
    return top_k, top_p


def _clear_top_k(z: Any, top_k: Any) -> Any:
    """Each row's k moved, where needed, to the nearest rank whose gap to the next is LOGIT_GAP."""
    import torch

    vocab = z.shape[-1]
    gaps = torch.sort(z, dim=-1, descending=True).values.diff(dim=-1).neg()  # gaps[r, i]: rank i+1 to i+2
    clear = gaps >= LOGIT_GAP
    result = top_k.clone()
    for row in range(z.shape[0]):
        k = int(top_k[row])
        if k >= vocab or bool(clear[row, k - 1]):
            continue
        ranks = torch.nonzero(clear[row, : max(TOP_K_MAX, k)]).flatten() + 1
        if ranks.numel() == 0:
            result[row] = vocab
        else:
            result[row] = ranks[torch.argmin((ranks - k).abs())]
    return result


def _clear_top_p(z: Any, top_k: Any, target: Any) -> Any:
    """Each row's top_p moved, where needed, so its boundary token has MASS_GAP on both sides and
    LOGIT_GAP to the next token: clamped into the boundary token's interval, or else moved to the
    nearest token, at or above it, whose interval is wide enough."""
    import torch

    probs = _top_k_probs(z, top_k)
    ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    before = torch.cumsum(ordered, dim=-1) - ordered
    after = before + ordered
    z_sorted = z.gather(1, order)
    result = target.clone()
    for row in range(z.shape[0]):
        p = float(target[row])
        if p >= 1.0:
            continue
        kept = int((ordered[row] > 0).sum())
        next_gap = torch.cat([z_sorted[row, :kept - 1] - z_sorted[row, 1:kept], torch.tensor([math.inf])])
        wide = (ordered[row, :kept] >= 2 * MASS_GAP + 1e-12) & (next_gap >= LOGIT_GAP)
        boundary = int((before[row, :kept] < p).sum()) - 1
        candidates = torch.nonzero(wide).flatten()
        if candidates.numel() == 0:
            result[row] = 1.0
            continue
        below = candidates[candidates <= boundary]
        m = int(below[-1]) if below.numel() else int(candidates[0])
        low, high = float(before[row, m]) + MASS_GAP, float(after[row, m]) - MASS_GAP
        result[row] = min(max(p, low), high)
    return result


def _clear_race(probs: Any, exponential: Any, generator: Any) -> Any:
    """The noise redrawn for rows whose race is not won clearly (RACE_MARGIN, RACE_MIN_PROB)."""
    import torch

    for _ in range(200):
        ratio = probs / exponential.to(torch.float64)
        top2 = torch.topk(ratio, 2, dim=-1)
        winner_prob = probs.gather(1, top2.indices[:, :1]).squeeze(1)
        unclear = (top2.values[:, 0] < (1 + RACE_MARGIN) * top2.values[:, 1]) | (winner_prob < RACE_MIN_PROB)
        count = int(unclear.sum())
        if count == 0:
            return exponential
        exponential[unclear] = _exponential((count, probs.shape[-1]), generator)
    raise RuntimeError("top_k_top_p_sampling inputs: no clear race after 200 draws of the noise")


def _exponential(size: tuple[int, int], generator: Any) -> Any:
    """Exponential(1) noise, at least 1e-6 (so no ratio is infinite; the clamp moves 1e-6 of mass)."""
    import torch

    uniform = torch.rand(size, generator=generator, dtype=torch.float64)
    return (-torch.log1p(-uniform)).clamp_min(1e-6).to(torch.float32)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """(logits fp32 (batch, vocab), temperature fp32 (batch,), top_k int32 (batch,), top_p fp32
    (batch,), exponential fp32 (batch, vocab), softcap float), with every decision clear (module
    docstring). Drawn on the default device (``seeded``)."""
    import torch

    generator = seeded.generator(seed)
    batch, vocab = shape["batch"], shape["vocab"]
    softcap = float(params.get("softcap", 0.0))
    logits = _draw_logits(batch, vocab, softcap, generator)
    low, high = TEMPERATURE_RANGE
    temperature = (low + (high - low) * torch.rand(batch, generator=generator)).to(torch.float32)
    top_k, target = _pattern(batch, vocab, generator)
    z = _scaled(logits, temperature, softcap)
    top_k = _clear_top_k(z, top_k)
    top_p = _clear_top_p(z, top_k, target).to(torch.float32)
    exponential = _clear_race(_kept_probs(z, top_k, top_p), _exponential((batch, vocab), generator), generator)
    return (logits.to(device), temperature.to(device), top_k.to(torch.int32).to(device), top_p.to(device),
            exponential.to(device), softcap)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read the logits and the noise, write the probabilities (all fp32), plus the per-row
    parameters and the token: 12 bytes per logit. The selection's extra passes over a row are a
    kernel's choice, not a floor."""
    batch, vocab = shape["batch"], shape["vocab"]
    return Roofline(bytes_moved=3 * 4 * batch * vocab + batch * (4 + 4 + 4 + 8),
                    flops=FLOPS_PER_ELEMENT * batch * vocab)
