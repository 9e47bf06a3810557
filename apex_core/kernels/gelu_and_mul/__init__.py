"""GELU-and-mul with GELU's tanh approximation, the GeGLU activation: out = gelu_tanh(gate) · up
for x = [gate | up].

Gemma 2's MLP (``hidden_activation = "gelu_pytorch_tanh"``) computes it between the gate/up and
down projections; serving stacks fuse the two projections into one GEMM whose output row holds the
gate half then the up half, and call this kernel on it (vLLM's and aiter's ``gelu_tanh_and_mul``).
It runs in fp32 and rounds once to the model dtype. One read of x and one write of half its size:
memory-bound, like SiLU-and-mul, whose input layout and generator it shares.

gelu_tanh(g) = 0.5 · g · (1 + tanh(√(2/π) · (g + 0.044715 · g³))), which equals
g · sigmoid(2 · √(2/π) · (g + 0.044715 · g³)): the form our kernels use, since it needs only exp,
which every backend's Triton has.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels.silu_and_mul import input_rows, make_inputs_numpy, make_inputs_torch

__all__ = ["input_rows", "make_inputs_numpy", "make_inputs_torch", "reference_numpy", "reference_torch", "roofline"]

# The cube and its scale (3), the sum and its scale (2), the sigmoid (negate, exp, add, divide: 4),
# and two multiplies (by g and by up): 11 per output element.
FLOPS_PER_OUTPUT = 11
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
CUBE_COEFFICIENT = 0.044715


def reference_torch(x: Any) -> Any:
    """gelu(gate, approximate="tanh") * up over the two halves of the last dimension, in fp32, cast once to x's dtype."""
    import torch

    gate, up = x.to(torch.float32).chunk(2, dim=-1)
    return (torch.nn.functional.gelu(gate, approximate="tanh") * up).to(x.dtype)


def reference_numpy(x: np.ndarray) -> np.ndarray:
    """The NumPy reference: the tanh form, computed in float64 and returned in x's dtype."""
    x64 = x.astype(np.float64)
    gate, up = np.split(x64, 2, axis=-1)
    inner = SQRT_2_OVER_PI * (gate + CUBE_COEFFICIENT * gate**3)
    return (0.5 * gate * (1.0 + np.tanh(inner)) * up).astype(x.dtype)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read 2·I and write I elements per row."""
    rows = shape["rows"] if "rows" in shape else input_rows(shape, params)
    outputs = rows * shape["intermediate"]
    return Roofline(bytes_moved=3 * outputs * dtype_bytes(dtype), flops=FLOPS_PER_OUTPUT * outputs)
