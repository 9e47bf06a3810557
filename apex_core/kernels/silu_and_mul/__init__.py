"""SiLU-and-mul, the SwiGLU activation: out = silu(gate) · up for x = [gate | up].

The MLP's gate and up projections are one GEMM whose output row holds the gate half then the up
half; this kernel turns each (2·I)-wide row into an I-wide one. It runs in fp32 and rounds once to
the model dtype. One read of x and one write of half its size: memory-bound.

For MoE models the same kernel runs on the routed rows: after the first grouped GEMM every token
has one row per selected expert, so a task can set ``rows_per_token`` (top-k) and the input has
tokens · top-k rows of twice the expert's intermediate size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

# Sigmoid (negate, exp, add, divide) and two multiplies per output element.
FLOPS_PER_OUTPUT = 6


def reference_torch(x: Any) -> Any:
    """silu(gate) * up over the two halves of the last dimension, in fp32, cast once to x's dtype."""
    import torch

    gate, up = x.to(torch.float32).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).to(x.dtype)


def reference_numpy(x: np.ndarray) -> np.ndarray:
    """The NumPy reference: computed in float64 and returned in x's dtype."""
    x64 = x.astype(np.float64)
    gate, up = np.split(x64, 2, axis=-1)
    return (gate / (1.0 + np.exp(-gate)) * up).astype(x.dtype)


def input_rows(shape: dict[str, int], params: dict[str, Any]) -> int:
    """Rows of the input: one per token, or one per (token, selected expert) for a MoE layer."""
    return shape["tokens"] * int(params.get("rows_per_token", 1))


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (rows, 2 * intermediate): the fused gate/up projection's output, drawn on the CPU.

    Projection outputs are roughly Gaussian; unit spread puts gate values on both sides of SiLU's
    bend, where an inexact sigmoid shows.
    """
    import torch

    generator = seeded.generator(seed)
    x = torch.randn(input_rows(shape, params), 2 * shape["intermediate"], generator=generator, dtype=torch.float32)
    return (x.to(getattr(torch, dtype)).to(device),)


def make_inputs_numpy(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (rows, 2 * intermediate) as a NumPy array; ``device`` must be 'cpu'."""
    if device != "cpu":
        raise ValueError(f"NumPy inputs live on the CPU, not on {device!r}")
    rng = np.random.default_rng(seed)
    rows = shape.get("rows", shape.get("tokens", 0))
    return (rng.standard_normal((rows, 2 * shape["intermediate"])).astype(np.dtype(dtype)),)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read 2·I and write I elements per row."""
    rows = shape["rows"] if "rows" in shape else input_rows(shape, params)
    outputs = rows * shape["intermediate"]
    return Roofline(bytes_moved=3 * outputs * dtype_bytes(dtype), flops=FLOPS_PER_OUTPUT * outputs)
