"""Our dynamic per-token fp8 quantization for GPT-OSS-20B (hidden 2880, bf16 to e4m3fn).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- Decode and serving sizes spread each row over 8 warps, 16 values per thread instead of the
  baseline's 32, so each thread's serial chain of convert, scale, round and store is short; prefill
  sizes take 2 warps per row, so that more rows fit on each SM.
- Prefill sizes are bandwidth-bound, and bandwidth follows how many rows each SM keeps in flight,
  which the register footprint decides. The row stays in registers as packed bf16 and is widened to
  fp32 twice (for the absmax, then for the scaling, by a 16-bit shift the compiler does not merge
  with the first conversion): with 4 warps, 32 registers and 16 rows per SM on an H100-class SM
  against the baseline's 45 registers and 10 rows (ptxas, sm_90).
- One reciprocal per row and a multiply per value instead of a division per value (an fp32 division
  is a multi-instruction sequence). The quotient can differ from the reference's correctly rounded x
  / scale in the last fp32 bit, which moves a value sitting on an e4m3 rounding midpoint by one e4m3
  step: inside the task's tolerance, and the same choice aiter makes.
"""

import torch
import triton
import triton.language as tl

# (rows per program, warps). Measured on an H200 with benchmarks/config_sweep.py (2026-11-30): 8
# warps per row were 1.003x the baseline at 4 tokens and tied it at 256; at 16384 tokens 2 warps
# per row were 1.053x. Triton's autotuner, timing each choice once, picked differently from
# process to process, so the choice is fixed.


def _tile(n_rows: int) -> tuple[int, int]:
    return (1, 8) if n_rows <= 1024 else (1, 2)


@triton.jit
def _widen(v):
    # bf16 -> fp32 by a 16-bit shift: exact, and a different op chain than .to(), so the compiler
    # keeps the row as packed bf16 (half the registers) instead of holding an fp32 copy.
    return (v.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _per_token_quant_fp8_rows(
    x_ptr, q_ptr, scale_ptr, n_rows, x_row_stride, q_row_stride, n_cols,
    FP8_MAX: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * x_row_stride + cols[None, :], mask=mask, other=0.0)
    absmax = tl.maximum(tl.max(tl.abs(x.to(tl.float32)), axis=1), 1e-10)
    # One reciprocal per row and a multiply per value instead of a division per value.
    q = _widen(x) * (FP8_MAX / absmax)[:, None]
    q = tl.minimum(tl.maximum(q, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + rows[:, None].to(tl.int64) * q_row_stride + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + rows, absmax / FP8_MAX, mask=row_ok)


def per_token_quant_fp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows = rows.shape[0]
    q = torch.empty(rows.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((n_rows, 1), dtype=torch.float32, device=x.device)
    rows_per_program, warps = _tile(n_rows)
    _per_token_quant_fp8_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, q, scales, n_rows, rows.stride(0), q.stride(0), hidden,
        FP8_MAX=448.0, BLOCK_N=triton.next_power_of_2(hidden), ROWS=rows_per_program, num_warps=warps,
    )
    return q, scales
