"""What the GQA attention kernels (prefill and paged decode) share about their logits: the scale, Gemma
2's soft cap, the query heads' temperatures, and the optional trailing arguments of their calls.

A task's ``params`` say which apply: ``attention_sinks`` (GPT-OSS: a learned logit per head in the
softmax denominator, passed with the sliding window), ``softcap`` (Gemma 2: every scaled logit
becomes cap · tanh(logit / cap), passed after the sinks slot and the window) and
``query_pre_attn_scalar`` (Gemma 2 scales by its inverse square root instead of head_dim's).
"""

from __future__ import annotations

from typing import Any


def attention_scale(params: dict[str, Any]) -> float:
    """The logit scale: query_pre_attn_scalar^-1/2 where the model states it, else head_dim^-1/2."""
    return float(params.get("query_pre_attn_scalar") or params["head_dim"]) ** -0.5


def query_temperature(num_heads: int, head_dim: int, scale: float, softcap: float, generator: Any) -> Any:
    """A factor per query head for N(0, 1) queries against N(0, 1) keys: logits spread 1 to 2.5
    standard deviations, broad to sharp heads as trained ones are; under a soft cap, 0.4 to 1 times
    the cap, so the cap bends most logits and a kernel that leaves it out fails by far."""
    import torch

    spread = 1.0 + 1.5 * torch.rand(num_heads, 1, generator=generator)
    if softcap > 0:
        spread = spread * softcap / (2.5 * head_dim**0.5 * scale)
    return spread


def optional_arguments(params: dict[str, Any], num_heads: int, generator: Any, device: str) -> list[Any]:
    """The call's arguments after ``scale``: none, (sinks, sliding_window) or (sinks or None,
    sliding_window, softcap). Sinks range from a negligible to a dominant share of a head's mass."""
    import torch

    window, softcap = int(params.get("sliding_window") or 0), float(params.get("softcap", 0.0))
    sinks = None
    if params.get("attention_sinks"):
        sinks = (3.0 + 2.0 * torch.randn(num_heads, generator=generator)).to(device)
    if softcap > 0:
        return [sinks, window, softcap]
    return [sinks, window] if sinks is not None else []
