"""fp8 w8a8 GEMM with DeepSeek-V3/R1's block scales.

x_q (M, K) float8_e4m3fn with one fp32 scale per token per 128 input channels, x_scale
(M, K/128); w_q (N, K) float8_e4m3fn with one fp32 scale per 128x128 block, w_scale
(N/128, K/128) (the checkpoint's ``weight_scale_inv``); y (M, N) bf16 is the product of the
dequantized tensors with fp32 accumulation. DeepSeek's inference kernel (inference/kernel.py,
fp8_gemm) computes it as a sum over 128-wide K blocks of dot(x_q, w_q^T) * x_scale * w_scale,
the same function.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.gemm_fp8.quantize import activation_channel_scale, random_quantized
from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline
from apex_core.kernels import seeded

BLOCK = 128
"""Quantization block edge: DeepSeek-R1's quantization_config.weight_block_size is [128, 128]."""


def reference_torch(x_q: Any, x_scale: Any, w_q: Any, w_scale: Any) -> Any:
    """y (M, N) bf16 = dequant(x_q) @ dequant(w_q)^T in fp32, scales per 1x128 and 128x128 block."""
    import torch

    k = x_q.shape[1]
    n = w_q.shape[0]
    x = x_q.to(torch.float32) * x_scale.repeat_interleave(128, dim=1)[:, :k]
    w = w_q.to(torch.float32) * w_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:n, :k]
    with exact_fp32_matmuls():
        return (x @ w.T).to(torch.bfloat16)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x_q, x_scale (tokens, k/128), w_q, w_scale (n/128, k/128), quantized from realistic fp32 tensors.

    Activations are N(0, 1) with log-normal per-channel magnitudes, quantized per token per 128
    channels (DeepSeek's act_quant); weights are N(0, 1/k), quantized per 128x128 block.
    """

    generator = seeded.generator(seed)
    tokens, k, n = shape["tokens"], shape["k"], shape["n"]
    channel = activation_channel_scale(k, generator)
    x_q, x_scale = random_quantized(tokens, k, 1, BLOCK, generator, column_scale=channel)
    w_q, w_scale = random_quantized(n, k, BLOCK, BLOCK, generator, std=k**-0.5)
    return x_q.to(device), x_scale.to(device), w_q.to(device), w_scale.to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x_q, w_q (1 byte each) and their scales, write y (bf16); 2*M*N*K FLOPs at the fp8 rate."""
    m, k, n = shape["tokens"], shape["k"], shape["n"]
    k_blocks, n_blocks = -(-k // BLOCK), -(-n // BLOCK)
    return Roofline(
        bytes_moved=m * k + n * k + 2 * m * n + 4 * (m * k_blocks + n_blocks * k_blocks),
        flops=2 * m * n * k,
    )
