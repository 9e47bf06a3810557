"""fp8 w8a8 GEMM with per-token activation scales and per-channel weight scales.

y = (x_q @ w_q^T) * x_scale * w_scale^T in bf16, x_q (M, K) and w_q (N, K) float8_e4m3fn,
x_scale (M, 1) and w_scale (N, 1) float32: the FP8-dynamic scheme (dynamic per-token activations,
static per-channel weights) of vLLM's fp8 checkpoints for Llama and Qwen. Products of two e4m3
values are exact in fp32, so the reference is exact up to fp32 summation order and the final
rounding to bf16.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.gemm_fp8.quantize import activation_channel_scale, random_quantized
from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline
from apex_core.kernels import seeded


def reference_torch(x_q: Any, x_scale: Any, w_q: Any, w_scale: Any) -> Any:
    """y (M, N) bf16: the fp8 product accumulated in fp32, scaled per token and per channel."""
    import torch

    with exact_fp32_matmuls():
        acc = x_q.to(torch.float32) @ w_q.to(torch.float32).T
    return (acc * x_scale * w_scale.T).to(torch.bfloat16)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x_q, x_scale (tokens, 1), w_q, w_scale (n, 1), quantized from realistic fp32 tensors.

    Activations are N(0, 1) with log-normal per-channel magnitudes (outlier channels), quantized
    per token; weights are N(0, 1/k), quantized per output channel. y is then O(1).
    """

    generator = seeded.generator(seed)
    tokens, k, n = shape["tokens"], shape["k"], shape["n"]
    channel = activation_channel_scale(k, generator)
    x_q, x_scale = random_quantized(tokens, k, 1, k, generator, column_scale=channel)
    w_q, w_scale = random_quantized(n, k, 1, k, generator, std=k**-0.5)
    return x_q.to(device), x_scale.to(device), w_q.to(device), w_scale.to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x_q, w_q (1 byte each) and the scales, write y (bf16); 2*M*N*K FLOPs at the fp8 rate."""
    m, k, n = shape["tokens"], shape["k"], shape["n"]
    return Roofline(bytes_moved=m * k + n * k + 2 * m * n + 4 * (m + n), flops=2 * m * n * k)
