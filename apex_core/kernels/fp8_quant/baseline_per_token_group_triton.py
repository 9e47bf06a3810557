"""Baseline per-token-group fp8 quantization in Triton, written the way inference stacks write it.

One program per group of ``group_size`` values (as vLLM's and SGLang's per_token_group_quant_fp8):
load the group, take its absolute maximum, scale = max(absmax, 1e-10) / 448, store
clamp(x / scale, -448, 448) as float8_e4m3fn and the group's scale into a row-major
(tokens, hidden / group_size) table. One warp per 128-value group, no further tuning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _per_token_group_quant_fp8_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    group_size,
    FP8_MAX: tl.constexpr,
    BLOCK: tl.constexpr,
):
    group = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < group_size
    offsets = group * group_size + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10)
    scale = absmax / FP8_MAX
    q = tl.minimum(tl.maximum(x / scale, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + offsets, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + group, scale)


def per_token_group_quant_fp8(x: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    x = x.contiguous()
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((*x.shape[:-1], hidden // group_size), dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(group_size)
    _per_token_group_quant_fp8_kernel[(x.numel() // group_size,)](
        x, q, scales, group_size,
        FP8_MAX=torch.finfo(torch.float8_e4m3fn).max, BLOCK=block,
        num_warps=min(max(block // 256, 1), 8), num_stages=1,
    )
    return q, scales
