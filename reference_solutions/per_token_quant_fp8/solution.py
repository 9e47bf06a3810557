"""Our dynamic per-token fp8 quantization (bf16 to e4m3fn): the bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The launch (rows per program, warps) is chosen per model from measurements (the constants below;
  reference_solutions/per_token_quant_fp8/constants.toml says what was measured). At decode sizes
  the call is mostly launch latency; GPT-OSS-20B's 2880-wide rows gain from 8 warps there.
- Prefill sizes are bandwidth-bound, and bandwidth follows how many rows each SM keeps in flight,
  which the register footprint decides. The row stays in registers as packed bf16 and is widened to
  fp32 twice (for the absmax, then for the scaling, by a 16-bit shift the compiler does not merge
  with the first conversion): fewer registers and more rows per SM than the baseline
  (ptxas figures per model in constants.toml).
- One reciprocal per row and a multiply per value instead of a division per value (an fp32 division
  is a multi-instruction sequence). The quotient can differ from the reference's correctly rounded x
  / scale in the last fp32 bit, which moves a value sitting on an e4m3 rounding midpoint by one e4m3
  step: inside the task's tolerance, and the same choice aiter makes.
"""

import torch
import triton
import triton.language as tl

# (rows per program, warps) up to DECODE_MAX_ROWS rows, and beyond. Triton's autotuner, timing each
# choice once, picked differently from process to process, so the choice is fixed per model.
# apex:model-constants


def _tile(n_rows: int) -> tuple[int, int]:
    return DECODE_TILE if n_rows <= DECODE_MAX_ROWS else PREFILL_TILE


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
