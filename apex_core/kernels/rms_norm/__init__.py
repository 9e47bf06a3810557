"""RMSNorm: y = x / sqrt(mean(x², last dim) + eps) · weight.

One normalization per token row, accumulated in fp32 whatever the storage dtype (as Llama's
reference implementation and the inference stacks do), the result cast back to x's dtype. It reads
x and weight once and writes y once, so it is memory-bound: the roofline is its bytes.

Zero-centered variant (Qwen3-Next / Qwen3.5, Gemma): the checkpoint stores w around 0 and the layer
scales by (1 + w), in fp32, before the single cast back to x's dtype. Storing the offset keeps
weight decay from pulling the scale towards 0 and keeps more bf16 precision near a scale of 1; a
kernel that forms 1 + w in bf16 throws that precision away. Tasks select it with the parameter
``zero_centered`` (which also draws the weight around 0) and the reference
``reference_torch_zero_centered``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded

_NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16}


def reference_torch(x: Any, weight: Any, eps: float) -> Any:
    """The PyTorch reference: fp32 accumulation, output in x's dtype on x's device."""
    import torch

    x32 = x.to(torch.float32)
    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x32 * inv_rms * weight.to(torch.float32)).to(x.dtype)


def reference_torch_zero_centered(x: Any, weight: Any, eps: float) -> Any:
    """The zero-centered reference: scale by (1 + weight) in fp32, one cast back to x's dtype."""
    import torch

    x32 = x.to(torch.float32)
    inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x32 * inv_rms * (1.0 + weight.to(torch.float32))).to(x.dtype)


def reference_numpy(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """The NumPy reference: computed in float64 and returned in x's dtype."""
    x64 = x.astype(np.float64)
    inv_rms = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)
    return (x64 * inv_rms * weight.astype(np.float64)).astype(x.dtype)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (tokens, hidden) and weight of (hidden,), drawn on the CPU so any device sees the same values.

    With ``params["zero_centered"]`` the weight is the stored offset (the layer applies 1 + w), drawn
    so that 1 + w has the same spread as an ordinary weight.
    """
    import torch

    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    rows, hidden = shape["tokens"], shape["hidden"]
    x = torch.randn(rows, hidden, generator=generator, dtype=torch.float32)
    # Trained RMSNorm weights sit around 1 with a spread; a weight of all ones would hide bugs
    # that drop the weight.
    offset = 0.0 if params.get("zero_centered") else 1.0
    weight = offset + 0.5 * torch.randn(hidden, generator=generator, dtype=torch.float32)
    return x.to(torch_dtype).to(device), weight.to(torch_dtype).to(device), float(params["eps"])


def make_inputs_numpy(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (rows, hidden) and weight of (hidden,) as NumPy arrays; ``device`` must be 'cpu'."""
    if device != "cpu":
        raise ValueError(f"NumPy inputs live on the CPU, not on {device!r}")
    rng = np.random.default_rng(seed)
    np_dtype = _NUMPY_DTYPES[dtype]
    rows, hidden = shape["rows"], shape["hidden"]
    x = rng.standard_normal((rows, hidden)).astype(np_dtype)
    weight = (1.0 + 0.5 * rng.standard_normal(hidden)).astype(np_dtype)
    return x, weight, float(params["eps"])


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x and weight, write y; about 4 FLOPs per element (square, add, scale, weight)."""
    itemsize = dtype_bytes(dtype)
    rows = shape.get("tokens", shape.get("rows", 0))
    hidden = shape["hidden"]
    elements = rows * hidden
    return Roofline(bytes_moved=(2 * elements + hidden) * itemsize, flops=4 * elements)
