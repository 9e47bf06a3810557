"""Fused residual add + RMSNorm: residual_out = x + residual; out = rms_norm(residual_out) · weight.

Every pre-norm decoder layer after the first adds the sublayer's output ``x`` to the residual stream
and normalizes the sum for the next sublayer; inference stacks fuse the two so the sum is read once.
The sum is kept in the model dtype (it *is* the residual stream the next layer adds to), and the
norm is taken of that rounded sum in fp32, as vLLM's native path does (``x = x + residual;
residual = x; x = x.float() ...``). The call is functional: it returns (out, residual_out) and
leaves its inputs alone. Reads x and residual, writes two rows per token: memory-bound.

Zero-centered variant (Qwen3.5): the norm scales by (1 + weight) in fp32, see ``rms_norm``.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

# A handful of residual-stream channels carry activations far larger than the rest ("massive
# activations" of trained LLMs); they dominate the row's RMS, which a kernel must still get right.
OUTLIER_CHANNELS = 4
OUTLIER_SCALE = 16.0


def reference_torch(x: Any, residual: Any, weight: Any, eps: float) -> Any:
    """(out, residual_out): the sum rounded to x's dtype, then its RMSNorm accumulated in fp32."""
    import torch

    residual_out = x + residual
    r32 = residual_out.to(torch.float32)
    inv_rms = torch.rsqrt(r32.pow(2).mean(dim=-1, keepdim=True) + eps)
    out = (r32 * inv_rms * weight.to(torch.float32)).to(x.dtype)
    return out, residual_out


def reference_torch_zero_centered(x: Any, residual: Any, weight: Any, eps: float) -> Any:
    """(out, residual_out) with the zero-centered scale (1 + weight), formed in fp32."""
    import torch

    residual_out = x + residual
    r32 = residual_out.to(torch.float32)
    inv_rms = torch.rsqrt(r32.pow(2).mean(dim=-1, keepdim=True) + eps)
    out = (r32 * inv_rms * (1.0 + weight.to(torch.float32))).to(x.dtype)
    return out, residual_out


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x (the sublayer's output), residual (the stream), weight and eps, drawn on the CPU.

    The residual stream is wider than a sublayer's output and has a few outlier channels; the
    weight is around 1, or around 0 with ``params["zero_centered"]`` (the layer then applies 1 + w).
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, hidden = shape["tokens"], shape["hidden"]
    x = torch.randn(tokens, hidden, generator=generator, dtype=torch.float32)
    residual = 2.0 * torch.randn(tokens, hidden, generator=generator, dtype=torch.float32)
    outliers = torch.randperm(hidden, generator=generator)[: min(OUTLIER_CHANNELS, hidden)]
    residual[:, outliers] *= OUTLIER_SCALE
    offset = 0.0 if params.get("zero_centered") else 1.0
    weight = offset + 0.5 * torch.randn(hidden, generator=generator, dtype=torch.float32)
    return (
        x.to(torch_dtype).to(device),
        residual.to(torch_dtype).to(device),
        weight.to(torch_dtype).to(device),
        float(params["eps"]),
    )


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x, residual and weight, write out and residual_out; ~5 FLOPs per element."""
    itemsize = dtype_bytes(dtype)
    elements = shape["tokens"] * shape["hidden"]
    return Roofline(bytes_moved=(4 * elements + shape["hidden"]) * itemsize, flops=5 * elements)
