"""LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) · weight + bias, over the last dimension.

Falcon-7B normalizes with LayerNorm, not RMSNorm: every decoder layer's one ``input_layernorm``
(attention and MLP run in parallel off it) and the final ``ln_f`` subtract the row's mean, divide by
the biased standard deviation and add a bias. A kernel written for RMSNorm skips the mean and the
bias, so it cannot serve these layers; this family is their kernel.

The statistics are accumulated in fp32 whatever the storage dtype, as PyTorch's own layer_norm does
for bf16, and the result is rounded once to x's dtype. One read of x, weight and bias, one write of
y: memory-bound, so the roofline is its bytes.

The inputs look like a residual stream: each token row has its own scale and a mean that is far
from zero (at least half its standard deviation, either sign), so a kernel that leaves out the mean
(an RMSNorm in disguise) fails every row; weight and bias are drawn away from 1 and 0, so a kernel
that drops either fails too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from apex_core.kernels import seeded
from apex_core.kernels.roofline import Roofline, dtype_bytes

__all__ = ["FLOPS_PER_ELEMENT", "make_inputs_numpy", "make_inputs_torch", "reference_numpy", "reference_torch", "roofline"]

# The mean's sum (1), the centring (1), the variance's square and sum (2), and the scale by the
# inverse deviation, the weight and the bias (3): 7 per element.
FLOPS_PER_ELEMENT = 7
ROW_MEAN_RANGE = (0.5, 2.0)
"""|row mean| / row deviation is drawn from this range, with a random sign: never near zero."""


def reference_torch(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    """The PyTorch reference: two-pass mean and biased variance in fp32, output in x's dtype."""
    import torch

    x32 = x.to(torch.float32)
    mean = x32.mean(dim=-1, keepdim=True)
    centred = x32 - mean
    variance = (centred * centred).mean(dim=-1, keepdim=True)
    y = centred * torch.rsqrt(variance + eps) * weight.to(torch.float32) + bias.to(torch.float32)
    return y.to(x.dtype)


def reference_numpy(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """The NumPy reference: computed in float64 and returned in x's dtype."""
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=-1, keepdims=True)
    inv_std = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
    return (centred * inv_std * weight.astype(np.float64) + bias.astype(np.float64)).astype(x.dtype)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (tokens, hidden), weight and bias of (hidden,), and eps.

    x is a residual-stream-like row: a per-channel offset shared by all rows, plus a row mean and a
    row scale of its own (log-normal, as token norms vary), plus unit noise. Trained LayerNorm
    weights sit around 1 with a spread and biases around 0 with a spread; all ones or all zeros
    would hide a kernel that drops them.
    """
    import torch

    generator = seeded.generator(seed)
    rows, hidden = shape["tokens"], shape["hidden"]

    def draw(*size: int) -> Any:
        return torch.randn(*size, generator=generator, dtype=torch.float32)

    def uniform(low: float, high: float, *size: int) -> Any:
        return low + (high - low) * torch.rand(*size, generator=generator, dtype=torch.float32)

    scale = torch.exp(0.5 * draw(rows, 1))
    sign = torch.where(torch.rand(rows, 1, generator=generator) < 0.5, -1.0, 1.0)
    mean = sign * uniform(*ROW_MEAN_RANGE, rows, 1) * scale
    channel = 0.3 * draw(hidden)
    x = mean + scale * (channel + draw(rows, hidden))
    weight = 1.0 + 0.3 * draw(hidden)
    bias = 0.25 * draw(hidden)
    torch_dtype = getattr(torch, dtype)
    return (x.to(torch_dtype).to(device), weight.to(torch_dtype).to(device), bias.to(torch_dtype).to(device),
            float(params["eps"]))


def make_inputs_numpy(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """The same kind of draw as NumPy arrays (for the NumPy reference's tests); ``device`` must be 'cpu'."""
    if device != "cpu":
        raise ValueError(f"NumPy inputs live on the CPU, not on {device!r}")
    rng = np.random.default_rng(seed)
    rows, hidden = shape["tokens"], shape["hidden"]
    scale = np.exp(0.5 * rng.standard_normal((rows, 1)))
    mean = rng.choice([-1.0, 1.0], size=(rows, 1)) * rng.uniform(*ROW_MEAN_RANGE, size=(rows, 1)) * scale
    x = mean + scale * (0.3 * rng.standard_normal(hidden) + rng.standard_normal((rows, hidden)))
    np_dtype = np.dtype(dtype)
    weight = 1.0 + 0.3 * rng.standard_normal(hidden)
    bias = 0.25 * rng.standard_normal(hidden)
    return x.astype(np_dtype), weight.astype(np_dtype), bias.astype(np_dtype), float(params["eps"])


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x, weight and bias, write y: (2 · tokens + 2) · hidden elements."""
    rows, hidden = shape["tokens"], shape["hidden"]
    elements = rows * hidden
    return Roofline(bytes_moved=(2 * elements + 2 * hidden) * dtype_bytes(dtype), flops=FLOPS_PER_ELEMENT * elements)
