"""Weight-only MXFP4 GEMM of an MoE expert: y = x @ dequant(W)^T, x bf16, W in MXFP4 (``mxfp4``).

GPT-OSS's checkpoints store every expert's gate_up and down projection in MXFP4 (its config's
``quantization_config``: ``quant_method = "mxfp4"``, only attention, router, embedding and the LM
head left in bf16), and vLLM, SGLang and aiter serve it so. One expert's GEMM is the unit: at
decode the router sends each expert a handful of tokens (batch x 4 / 32 for GPT-OSS-20B), so the
kernel streams the expert's packed weight once for few rows and is memory-bound at 4.25 bits a
weight (4 bits plus an 8-bit scale per 32). The grouped MoE kernel over all experts is a later task.

The reference decodes the weight exactly in fp32 (``mxfp4.dequantize``), multiplies in fp32 (no
TF32) and rounds once to bf16: every dequantized weight and every product with a bf16 activation
is exact in fp32, so only the summation order differs from a kernel's.
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels import seeded
from apex_core.kernels.gemm_mxfp4.mxfp4 import BLOCK, dequantize, quantize
from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline


def reference_torch(x: Any, w_packed: Any, w_scale: Any) -> Any:
    """y (tokens, n) bf16 = x @ dequant(w_packed, w_scale)^T, decoded and accumulated in fp32."""
    import torch

    w = dequantize(w_packed, w_scale)
    with exact_fp32_matmuls():
        return (x.to(torch.float32) @ w.T).to(torch.bfloat16)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x (tokens, k) bf16 ~ N(0, 1); w_packed (n, k/2) uint8 and w_scale (n, k/32) uint8 quantized
    from a weight ~ N(0, 1/k) as the spec's conversion does, so y is O(1) and the scales sit where a
    trained projection's do (E8M0 codes around 120, 2^-7, at k = 2880).

    Quantized on the CPU, where the generator is seeded, in row chunks (a 5760 x 2880 weight is
    66 MB in fp32, its temporaries several times that), then moved to ``device``.
    """
    import torch

    generator = seeded.generator(seed)
    tokens, k, n = shape["tokens"], shape["k"], shape["n"]
    if k % BLOCK:
        raise ValueError(f"k = {k} is not a multiple of the MX block size {BLOCK}")
    x = torch.randn(tokens, k, generator=generator, dtype=torch.float32).to(torch.bfloat16)
    packed, scales = [], []
    for start in range(0, n, 1024):
        rows = min(1024, n - start)
        w = torch.randn(rows, k, generator=generator, dtype=torch.float32).mul_(k**-0.5)
        p, s = quantize(w)
        packed.append(p)
        scales.append(s)
    return x.to(device), torch.cat(packed).to(device), torch.cat(scales).to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x (bf16), the packed weight (k/2 bytes a row) and its scales (k/32 bytes a row), write
    y (bf16): 4.25 bits a weight. 2*M*N*K FLOPs (at the bf16 rate: Hopper has no FP4 instruction,
    a kernel decodes to bf16 and runs a bf16 dot)."""
    m, k, n = shape["tokens"], shape["k"], shape["n"]
    return Roofline(bytes_moved=2 * m * k + n * k // 2 + n * k // BLOCK + 2 * m * n, flops=2 * m * n * k)
