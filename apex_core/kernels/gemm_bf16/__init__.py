"""bf16 GEMM of a linear layer: y = x @ w^T with x (tokens, K), w (N, K) as nn.Linear stores it.

fp32 accumulation and one rounding to bf16 at the end, as cuBLAS/hipBLASLt and the inference
stacks' Triton GEMMs do. Each task is the most expensive dense projection of its model. Decode
token counts are memory-bound (the weight is streamed once for a handful of rows); prefill
counts are compute-bound (2*M*N*K FLOPs against the matrix cores).
"""

from __future__ import annotations

from typing import Any

from apex_core.kernels.precision import exact_fp32_matmuls
from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(x: Any, w: Any) -> Any:
    """y = x @ w^T computed in fp32 (no TF32), returned in x's dtype."""
    import torch

    with exact_fp32_matmuls():
        return (x.to(torch.float32) @ w.to(torch.float32).T).to(x.dtype)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x (tokens, k) ~ N(0, 1) and w (n, k) ~ N(0, 1/k), as a trained projection is scaled, so y is O(1)."""
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    tokens, k, n = shape["tokens"], shape["k"], shape["n"]
    x = torch.randn(tokens, k, generator=generator, dtype=torch_dtype)
    # Drawn directly in the storage dtype: weights are up to a few hundred megabytes.
    w = torch.randn(n, k, generator=generator, dtype=torch_dtype).mul_(k**-0.5)
    return x.to(device), w.to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x and w once, write y once; 2*M*N*K FLOPs."""
    itemsize = dtype_bytes(dtype)
    m, k, n = shape["tokens"], shape["k"], shape["n"]
    return Roofline(bytes_moved=(m * k + n * k + m * n) * itemsize, flops=2 * m * n * k)
