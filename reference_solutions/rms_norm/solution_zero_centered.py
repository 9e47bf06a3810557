"""Our zero-centered RMSNorm (scale 1 + w, formed in fp32)
as Qwen3.5 and Gemma 2 norm (bf16; written for Qwen3.5-27B's 5120-wide rows).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- The weight is loaded together with the row, before the sum of squares. The baseline loads it after
  the cross-warp reduction, whose barrier loads cannot cross, so each row waits for a second memory
  round trip; at decode sizes (a handful of rows, pure latency, caches cold) that is a large share
  of the call.
- Decode and serving sizes (up to 1024 rows) spread each row over 16 warps, 16 values per thread
  instead of the baseline's 64, so each thread's serial chain of loads, math and stores is short.
- Prefill sizes are bandwidth-bound, and what sets bandwidth is how many rows each SM keeps in
  flight, which the register footprint decides. The row stays in registers as packed bf16 and is
  widened to fp32 twice (once for the sum of squares, once for the output, by a 16-bit shift that
  the compiler does not merge with the first conversion) instead of as an fp32 copy: with 4 warps,
  80 registers, 6 rows per SM on an H100-class SM versus the baseline's 92 registers, 5 rows per SM
  (ptxas, sm_90), and no serialized weight fetch.
5120 is a multiple of 16, so Triton proves 16-byte alignment of every row and of the column mask,
and keeps all accesses 16-byte vectors despite the mask.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _widen(v):
    # bf16 -> fp32 by a 16-bit shift: exact, and a different op chain than .to(), so the compiler
    # keeps the row as packed bf16 (half the registers) instead of holding an fp32 copy.
    return (v.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _zero_centered_rms_norm_row(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    # The weight (stored as scale - 1) is issued with the row, so its latency hides behind the row's.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    x32 = x.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x32 * x32, axis=0) / n_cols + eps)
    y = _widen(x) * inv_rms * (1.0 + _widen(w))
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows = rows.shape[0]
    block_n = triton.next_power_of_2(hidden)
    # Few rows: latency-bound, spread each row over up to 16 warps. Many rows: bandwidth-bound,
    # 4 warps keep the most rows resident per SM.
    num_warps = max(4, min(16, block_n // 256)) if n_rows <= 1024 else 4
    _zero_centered_rms_norm_row[(n_rows,)](
        rows, weight.contiguous(), y, rows.stride(0), y.stride(0), hidden, eps, BLOCK_N=block_n, num_warps=num_warps
    )
    return y.reshape(x.shape)
