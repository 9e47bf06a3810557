"""GPT-OSS's clamped SwiGLU over interleaved gate/linear columns.

GPT-OSS's MoE experts compute ``t = mlp1(x)`` whose columns alternate gate and linear values
(``x_glu = t[..., ::2]``, ``x_linear = t[..., 1::2]``), then (openai/gpt-oss, gpt_oss/torch/model.py)::

    x_glu = x_glu.clamp(max=limit)
    x_linear = x_linear.clamp(-limit, limit)
    out = x_glu * sigmoid(alpha * x_glu) * (x_linear + 1)

with limit 7.0 and alpha 1.702 from the config. The clamp keeps outlier pre-activations from
blowing up; the +1 is a bias the checkpoint folded into the formula. It runs on the routed rows
(tokens x top-k), in fp32, rounded once to the model dtype. One read of x and one write of half
its size: memory-bound.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

# Spread of the expert pre-activations: wide enough that a few percent of values pass the clamp.
PREACTIVATION_STD = 3.0
# Two clamps, sigmoid (scale, negate, exp, add, divide), two multiplies and the +1.
FLOPS_PER_OUTPUT = 10


def reference_torch(x: Any, alpha: float, limit: float) -> Any:
    """Clamped SwiGLU of the even (gate) and odd (linear) columns, in fp32, cast once to x's dtype."""
    import torch

    x32 = x.to(torch.float32)
    x_glu, x_linear = x32[..., ::2], x32[..., 1::2]
    x_glu = x_glu.clamp(max=limit)
    x_linear = x_linear.clamp(min=-limit, max=limit)
    return (x_glu * torch.sigmoid(alpha * x_glu) * (x_linear + 1)).to(x.dtype)


def input_rows(shape: dict[str, int], params: dict[str, Any]) -> int:
    """One row per (token, selected expert)."""
    return shape["tokens"] * int(params.get("rows_per_token", 1))


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (rows, 2 * intermediate) with interleaved gate/linear columns, then alpha and limit."""
    import torch

    generator = seeded.generator(seed)
    rows = input_rows(shape, params)
    x = PREACTIVATION_STD * torch.randn(rows, 2 * shape["intermediate"], generator=generator, dtype=torch.float32)
    return x.to(getattr(torch, dtype)).to(device), float(params["alpha"]), float(params["limit"])


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read 2·I and write I elements per row."""
    outputs = input_rows(shape, params) * shape["intermediate"]
    return Roofline(bytes_moved=3 * outputs * dtype_bytes(dtype), flops=FLOPS_PER_OUTPUT * outputs)
