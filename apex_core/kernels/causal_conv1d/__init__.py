"""Short depthwise causal convolution with SiLU, as before Qwen3.5's linear-attention layers.

Gated DeltaNet projects each token to q, k and v (10240 channels for Qwen3.5-27B), then mixes every
channel with its own previous three tokens through a width-4 causal convolution and a SiLU:
out[b, t, c] = silu(sum_j weight[c, j] * x[b, t - 3 + j, c]), with x = 0 before the first token
(a fresh prefill; Qwen3.5's conv has no bias). The layout is channel-last, (batch, seqlen, dim), as
vLLM's Qwen3-Next prefill hands the projected tokens to its Triton causal_conv1d (a (dim, tokens)
view of token-major memory) and as fla's ShortConvolution takes them. Accumulation is fp32.

Each output reads a handful of neighbouring inputs: the kernel reads x once and writes out once,
so it is memory-bound.
"""

from __future__ import annotations

from typing import Any

import torch

from apex_core.kernels.roofline import Roofline, dtype_bytes
from apex_core.kernels import seeded


def reference_torch(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """fp32 causal depthwise convolution over the time axis of (batch, seqlen, dim), then SiLU."""
    width = weight.shape[1]
    seqlen = x.shape[1]
    x32 = torch.nn.functional.pad(x.to(torch.float32), (0, 0, width - 1, 0))  # zeros before token 0
    w32 = weight.to(torch.float32)
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for j in range(width):  # tap j multiplies the input (width - 1 - j) tokens back
        acc += w32[:, j] * x32[:, j : j + seqlen, :]
    return torch.nn.functional.silu(acc).to(x.dtype)


def make_inputs_torch(shape: dict[str, int], dtype: str, seed: int, device: str, params: dict[str, Any]) -> tuple:
    """x of (batch, seqlen, dim) ~ N(0, 1) like projected activations, weight of (dim, width)."""
    generator = seeded.generator(seed)
    torch_dtype = getattr(torch, dtype)
    batch, seqlen, dim = shape["batch"], shape["seqlen"], shape["dim"]
    width = int(params["kernel_width"])
    x = torch.randn(batch, seqlen, dim, generator=generator)
    # Depthwise conv weights with fan-in 4 are initialized U(-0.5, 0.5) (std 0.29); trained ones
    # spread wider. std 0.5 keeps the pre-activation around unit variance.
    weight = 0.5 * torch.randn(dim, width, generator=generator)
    return x.to(torch_dtype).to(device), weight.to(torch_dtype).to(device)


def roofline(shape: dict[str, int], dtype: str, params: dict[str, Any]) -> Roofline:
    """Read x and the weights once, write out once; a multiply-add per tap and ~3 FLOPs of SiLU."""
    width = int(params["kernel_width"])
    elements = shape["batch"] * shape["seqlen"] * shape["dim"]
    itemsize = dtype_bytes(dtype)
    return Roofline(bytes_moved=(2 * elements + shape["dim"] * width) * itemsize, flops=(2 * width + 3) * elements)
