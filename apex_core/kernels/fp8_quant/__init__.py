"""Dynamic fp8 (e4m3fn) activation quantization: per token, or per token and 128-wide group.

Before an fp8 (w8a8) GEMM the bf16 activations are quantized on the fly: each token row (or each
group of ``group_size`` consecutive values of a row, as DeepSeek-V3/R1's block-quantized linears
need) gets the scale ``max(|values|) / 448`` (448 is e4m3fn's largest finite value, the absmax
floored at 1e-10 so an all-zero row does not divide by zero), and the values become
``clamp(x / scale, -448, 448)`` rounded to e4m3fn. The call returns (q, scales); dequantization is
``q * scale``. One read of the bf16 row, one write of a byte per value: memory-bound.

This follows the Triton kernels of vLLM and SGLang (``per_token_group_quant_fp8``: absmax floored
at eps = 1e-10, division, clamp, cast) and aiter's ``dynamic_per_token_quant_fp8_i8``.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

FP8_E4M3_MAX = 448.0
ABSMAX_FLOOR = 1e-10
# Real activations are not i.i.d.: token norms vary, and a few channels carry much larger values
# ("massive activations") that set the per-token scale.
TOKEN_SCALE_LOG_STD = 0.5
OUTLIER_CHANNELS = 4
OUTLIER_SCALE = 10.0
# abs, max, divide, two clamps per value.
FLOPS_PER_VALUE = 5


def reference_per_token(x: Any) -> Any:
    """(q, scales): q float8_e4m3fn of x's shape, scales float32 of (tokens, 1), one per row."""
    import torch

    x32 = x.to(torch.float32)
    absmax = x32.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10)  # floor: an all-zero row
    scales = absmax / 448.0  # 448: the largest finite float8_e4m3fn
    q = (x32 / scales).clamp(min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return q, scales


def reference_per_token_group(x: Any, group_size: int) -> Any:
    """(q, scales): q float8_e4m3fn of x's shape, scales float32 of (tokens, hidden / group_size)."""
    import torch

    tokens, hidden = x.shape
    groups = x.to(torch.float32).reshape(tokens, hidden // group_size, group_size)
    absmax = groups.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10)  # floor: an all-zero group
    scales = absmax / 448.0  # 448: the largest finite float8_e4m3fn
    q = (groups / scales).clamp(min=-448.0, max=448.0).to(torch.float8_e4m3fn)
    return q.reshape(tokens, hidden), scales.reshape(tokens, hidden // group_size)


def _activations(shape: dict[str, int], seed: int) -> Any:
    import torch

    generator = seeded.generator(seed)
    tokens, hidden = shape["tokens"], shape["hidden"]
    x = torch.randn(tokens, hidden, generator=generator, dtype=torch.float32)
    x *= torch.exp(TOKEN_SCALE_LOG_STD * torch.randn(tokens, 1, generator=generator))
    outliers = torch.randperm(hidden, generator=generator)[: min(OUTLIER_CHANNELS, hidden)]
    x[:, outliers] *= OUTLIER_SCALE
    return x


def make_inputs_per_token(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (tokens, hidden): activations with varying token norms and a few outlier channels."""
    import torch

    return (_activations(shape, seed).to(getattr(torch, dtype)).to(device),)


def make_inputs_per_token_group(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (tokens, hidden) as for per-token quantization, then the group size."""
    import torch

    group_size = int(params["group_size"])
    if shape["hidden"] % group_size:
        raise ValueError(f"hidden {shape['hidden']} is not a multiple of the group size {group_size}")
    return _activations(shape, seed).to(getattr(torch, dtype)).to(device), group_size


def roofline_per_token(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read the rows, write a byte per value and one fp32 scale per row."""
    values = shape["tokens"] * shape["hidden"]
    moved = values * (dtype_bytes(dtype) + dtype_bytes("float8_e4m3fn")) + shape["tokens"] * dtype_bytes("float32")
    return Roofline(bytes_moved=moved, flops=FLOPS_PER_VALUE * values)


def roofline_per_token_group(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read the rows, write a byte per value and one fp32 scale per group."""
    values = shape["tokens"] * shape["hidden"]
    scales = values // int(params["group_size"])
    moved = values * (dtype_bytes(dtype) + dtype_bytes("float8_e4m3fn")) + scales * dtype_bytes("float32")
    return Roofline(bytes_moved=moved, flops=FLOPS_PER_VALUE * values)
