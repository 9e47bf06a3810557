"""Our per-token-group fp8 quantization for DeepSeek-R1 (hidden 7168, groups of 128, bf16 to e4m3fn).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The baseline launches one single-warp program per 128-value group: 56 programs per token, each
  moving 256 bytes. At serving and prefill sizes that is hundreds of thousands of tiny programs;
  an SM holds at most a few dozen of them, each with only 8 bytes per thread in flight, so the
  GPU runs far below its bandwidth and spends its time starting and retiring programs. Here one
  program quantizes a (rows x 8 groups x 128) tile as a 3-D block: each group's absmax is a
  reduction along the last axis inside the tile, 16 values per thread are in flight at serving
  and prefill sizes, and there are 16 times fewer programs. Two rows per program beat four by 4%
  at 256 tokens and 2% at 8192 on an H200 (benchmarks/config_sweep.py, 2026-11-30).
- At decode sizes (64 rows or fewer) a program takes one row and 8 groups with 8 warps, the same
  4 values per thread as the baseline, so latency does not grow while programs drop 8-fold.
- One reciprocal per group and a multiply per value instead of a division per value. The quotient
  can differ from the reference's correctly rounded x / scale in the last fp32 bit, which moves a
  value across an e4m3 rounding midpoint at most by one e4m3 step: inside the task's tolerance.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _per_token_group_quant_fp8_tiles(
    x_ptr, q_ptr, scale_ptr, n_rows, n_groups, x_row_stride, q_row_stride, scale_row_stride,
    FP8_MAX: tl.constexpr, GROUP: tl.constexpr, GROUPS_PER_PROGRAM: tl.constexpr, ROWS: tl.constexpr,
):
    groups = tl.program_id(0) * GROUPS_PER_PROGRAM + tl.arange(0, GROUPS_PER_PROGRAM)
    rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, GROUP)
    group_mask = (rows < n_rows)[:, None] & (groups < n_groups)[None, :]  # (ROWS, GROUPS)
    within = groups[None, :, None] * GROUP + cols[None, None, :]  # (1, GROUPS, GROUP)
    mask = group_mask[:, :, None]
    x = tl.load(x_ptr + rows[:, None, None] * x_row_stride + within, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=2), 1e-10)  # (ROWS, GROUPS)
    q = x * (FP8_MAX / absmax)[:, :, None]
    q = tl.minimum(tl.maximum(q, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + rows[:, None, None] * q_row_stride + within, q.to(q_ptr.dtype.element_ty), mask=mask)
    scale_offsets = rows[:, None] * scale_row_stride + groups[None, :]
    tl.store(scale_ptr + scale_offsets, absmax / FP8_MAX, mask=group_mask)


def _tile(n_rows: int) -> tuple[int, int, int]:
    """(groups per program, rows per program, warps): one row at decode sizes, two beyond."""
    return (8, 1, 8) if n_rows <= 64 else (8, 2, 4)


def per_token_group_quant_fp8(x: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if group_size & (group_size - 1):
        raise ValueError(f"group_size {group_size} must be a power of two")
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows, n_groups = rows.shape[0], hidden // group_size
    q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((n_rows, n_groups), dtype=torch.float32, device=x.device)
    groups_per_program, rows_per_program, num_warps = _tile(n_rows)
    grid = (triton.cdiv(n_groups, groups_per_program), triton.cdiv(n_rows, rows_per_program))
    _per_token_group_quant_fp8_tiles[grid](
        rows, q, scales, n_rows, n_groups, rows.stride(0), q.stride(0), scales.stride(0),
        FP8_MAX=448.0, GROUP=group_size, GROUPS_PER_PROGRAM=groups_per_program, ROWS=rows_per_program,
        num_warps=num_warps,
    )
    return q.reshape(x.shape), scales.reshape(*x.shape[:-1], n_groups)
