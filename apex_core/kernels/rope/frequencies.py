"""Rotary frequencies and the cos/sin cache of each model, as the inference stacks build them.

vLLM's ``get_rope`` precomputes one fp32 row per position: ``cat(cos(p·f), sin(p·f))`` over the
``rotary_dim / 2`` inverse frequencies ``f``, scaled by the method's attention factor. The kernel
only gathers rows of that cache, but the cache decides which angles the kernel sees, so each task
builds it from its model's real rope parameters:

- plain rope (Qwen3.5: theta 1e7 over the first 64 of 256 dims; its interleaved M-RoPE sections
  only differ for image/video tokens, and text tokens carry the same position in all three
  sections, so text reduces to this);
- ``llama3`` (Llama-3.1: long wavelengths divided by the factor, a smooth blend in between);
- ``yarn`` (GPT-OSS and DeepSeek: NTK-by-parts blend of interpolated and extrapolated
  frequencies, and an attention factor ``mscale`` that multiplies cos and sin);
- ``longrope`` (Phi-3.5: each frequency divided by its own factor from the config, and cos and sin
  multiplied by sqrt(1 + ln(max_position / original) / ln(original))).

The formulas follow vLLM's rotary_embedding layers (``Llama3RotaryEmbedding``,
``YaRNScalingRotaryEmbedding``, ``DeepseekScalingRotaryEmbedding``,
``Phi3LongRoPEScaledRotaryEmbedding``) and OpenAI's gpt-oss reference
``RotaryEmbedding`` (YaRN without rounding the correction range: ``yarn_truncate = 0``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch

_CACHE_KEYS = (
    "rotary_dim",
    "rope_theta",
    "max_position",
    "rope_scaling",
    "scaling_factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position",
    "beta_fast",
    "beta_slow",
    "yarn_truncate",
    "yarn_mscale",
    "yarn_mscale_all_dim",
    "longrope_factors",
)


def _base_inverse_frequencies(rotary_dim: int, theta: float) -> torch.Tensor:
    """theta^(-2i/rotary_dim) for i < rotary_dim/2, in fp32 as the stacks compute it."""
    return 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))


def _llama3_inverse_frequencies(inv_freq: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
    """Llama-3.1's scaling: keep short wavelengths, divide long ones by the factor, blend between."""
    factor = float(params["scaling_factor"])
    low_freq_factor = float(params["low_freq_factor"])
    high_freq_factor = float(params["high_freq_factor"])
    original = float(params["original_max_position"])
    wavelength = 2 * math.pi / inv_freq
    smooth = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    scaled = torch.where(wavelength > original / low_freq_factor, inv_freq / factor, blended)
    return torch.where(wavelength < original / high_freq_factor, inv_freq, scaled)


def _yarn_correction_dim(rotations: float, rotary_dim: int, theta: float, original: int) -> float:
    """The (fractional) dimension index whose wavelength fits ``rotations`` turns in ``original``."""
    return rotary_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))


def _yarn_inverse_frequencies(rotary_dim: int, theta: float, params: dict[str, Any]) -> torch.Tensor:
    """YaRN's NTK-by-parts: extrapolate fast dims, interpolate slow ones, ramp linearly between."""
    factor = float(params["scaling_factor"])
    original = int(params["original_max_position"])
    pos_freqs = theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
    extrapolated = 1.0 / pos_freqs
    interpolated = 1.0 / (factor * pos_freqs)
    low = _yarn_correction_dim(float(params["beta_fast"]), rotary_dim, theta, original)
    high = _yarn_correction_dim(float(params["beta_slow"]), rotary_dim, theta, original)
    if int(params.get("yarn_truncate", 1)):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    extrapolation_weight = 1 - ramp
    return interpolated * (1 - extrapolation_weight) + extrapolated * extrapolation_weight


def _longrope_inverse_frequencies(rotary_dim: int, theta: float, params: dict[str, Any]) -> torch.Tensor:
    """LongRoPE: theta^(-2i/rotary_dim) divided by the i-th rescale factor (a whitespace-separated
    string of rotary_dim/2 numbers, the config's long_factor list)."""
    factors = torch.tensor([float(f) for f in str(params["longrope_factors"]).split()], dtype=torch.float32)
    if factors.numel() != rotary_dim // 2:
        raise ValueError(f"longrope_factors has {factors.numel()} factors; rotary_dim {rotary_dim} needs {rotary_dim // 2}")
    return 1.0 / (factors * theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))


def _yarn_mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def attention_factor(params: dict[str, Any]) -> float:
    """What cos and sin are multiplied by: YaRN's mscale ratio, LongRoPE's sqrt(1 + ln(s) / ln(original))
    for the context extension s = max_position / original, 1 for the other methods.

    DeepSeek's form ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` covers both YaRN
    models: DeepSeek-R1 sets both to 1 (ratio 1; its softmax scale absorbs the correction), and
    GPT-OSS's ``0.1·ln(factor) + 1`` concentration is mscale 1 over mscale_all_dim 0.
    """
    scaling = params.get("rope_scaling", "none")
    if scaling == "longrope":
        original = float(params["original_max_position"])
        scale = float(params["max_position"]) / original
        return 1.0 if scale <= 1 else math.sqrt(1 + math.log(scale) / math.log(original))
    if scaling != "yarn":
        return 1.0
    factor = float(params["scaling_factor"])
    return _yarn_mscale(factor, float(params["yarn_mscale"])) / _yarn_mscale(factor, float(params["yarn_mscale_all_dim"]))


def inverse_frequencies(params: dict[str, Any]) -> torch.Tensor:
    """The rotary_dim/2 inverse frequencies of a task's rope parameters (fp32)."""
    rotary_dim, theta = int(params["rotary_dim"]), float(params["rope_theta"])
    scaling = params.get("rope_scaling", "none")
    if scaling == "none":
        return _base_inverse_frequencies(rotary_dim, theta)
    if scaling == "llama3":
        return _llama3_inverse_frequencies(_base_inverse_frequencies(rotary_dim, theta), params)
    if scaling == "yarn":
        return _yarn_inverse_frequencies(rotary_dim, theta, params)
    if scaling == "longrope":
        return _longrope_inverse_frequencies(rotary_dim, theta, params)
    raise ValueError(f"unknown rope scaling {scaling!r}; known: none, llama3, yarn, longrope")


@lru_cache(maxsize=8)
def _cache_for(key: tuple[tuple[str, Any], ...]) -> torch.Tensor:
    params = dict(key)
    inv_freq = inverse_frequencies(params)
    angles = torch.outer(torch.arange(int(params["max_position"]), dtype=torch.float32), inv_freq)
    scale = attention_factor(params)
    return torch.cat((angles.cos() * scale, angles.sin() * scale), dim=-1)


def cos_sin_cache(params: dict[str, Any]) -> torch.Tensor:
    """The (max_position, rotary_dim) fp32 cache: cos in the first half, sin in the second.

    Built once per parameter set and shared; callers must copy it before handing it out.
    """
    return _cache_for(tuple((k, params[k]) for k in _CACHE_KEYS if k in params))
