"""Our LayerNorm (bf16): the bar to beat. Falcon-7B (hidden 4544).

What it changes from the baseline, and why that is faster:
- No padding to a power of two. The baseline holds a 4544-wide row in an 8192-wide block, 45% of
  its lanes masked off but still holding registers and issuing instructions. Here the row is a
  power-of-two head (4096) and a masked power-of-two tail (448 of 512): 1.4% waste, so each thread
  holds about half the values and an SM keeps more rows in flight.
- One pass over the row's registers instead of two dependent ones. The baseline reduces the mean,
  waits for it, then reduces the variance of the centred row: two cross-warp exchanges in a row.
  Here the sum and the sum of squares are independent reductions of the same values, issued
  together. To keep the one-pass variance exact enough in fp32, both sums are taken of x minus the
  row's first element, a shift that sits within a few deviations of the mean, so E[d²] - E[d]²
  cancels little (about a bit of fp32 on typical rows, far below bf16's rounding).
- The weight and bias are issued with the row, before the reduction, instead of after it (where
  the baseline's second memory round trip waits out the barrier).
- Warps, rows per program and when the weight and bias are loaded are chosen by the row count
  (``_tile``), at the split the rms_norm solution measured on an H200: few rows are latency-bound,
  many rows bandwidth-bound.
Timed once (H100, 2026-12-06) with an earlier launch rule and found slower than the baseline at
256 and 8,192 rows; the rule now in ``_tile`` is not yet timed (docs/tasks.md).
Numerics: fp32 statistics and math, one rounding to the output dtype.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_rows(
    x_ptr, w_ptr, b_ptr, y_ptr, stride_x, stride_y, n_rows, n_cols, eps,
    ROWS: tl.constexpr, HEAD: tl.constexpr, TAIL: tl.constexpr, LATE_AFFINE: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    x_rows = x_ptr + rows[:, None] * stride_x
    y_rows = y_ptr + rows[:, None] * stride_y
    head = tl.arange(0, HEAD)  # HEAD <= n_cols: the head needs no column mask
    x_head = tl.load(x_rows + head[None, :], mask=row_ok[:, None], other=0.0)
    if not LATE_AFFINE:
        w_head = tl.load(w_ptr + head).to(tl.float32)
        b_head = tl.load(b_ptr + head).to(tl.float32)
    shift = tl.load(x_ptr + rows * stride_x, mask=row_ok, other=0.0).to(tl.float32)
    d_head = x_head.to(tl.float32) - shift[:, None]
    total = tl.sum(d_head, axis=1)
    squares = tl.sum(d_head * d_head, axis=1)
    if TAIL > 0:
        tail = HEAD + tl.arange(0, TAIL)
        tail_ok = tail < n_cols
        tail_mask = row_ok[:, None] & tail_ok[None, :]
        x_tail = tl.load(x_rows + tail[None, :], mask=tail_mask, other=0.0)
        if not LATE_AFFINE:
            w_tail = tl.load(w_ptr + tail, mask=tail_ok, other=0.0).to(tl.float32)
            b_tail = tl.load(b_ptr + tail, mask=tail_ok, other=0.0).to(tl.float32)
        d_tail = tl.where(tail_mask, x_tail.to(tl.float32) - shift[:, None], 0.0)
        total += tl.sum(d_tail, axis=1)
        squares += tl.sum(d_tail * d_tail, axis=1)
    mean_d = total / n_cols
    inv_std = tl.rsqrt(tl.maximum(squares / n_cols - mean_d * mean_d, 0.0) + eps)
    if LATE_AFFINE:  # fewer registers live across the reductions: more rows resident per SM
        w_head = tl.load(w_ptr + head).to(tl.float32)
        b_head = tl.load(b_ptr + head).to(tl.float32)
    y_head = (d_head - mean_d[:, None]) * inv_std[:, None] * w_head[None, :] + b_head[None, :]
    tl.store(y_rows + head[None, :], y_head.to(y_ptr.dtype.element_ty), mask=row_ok[:, None])
    if TAIL > 0:
        if LATE_AFFINE:
            w_tail = tl.load(w_ptr + tail, mask=tail_ok, other=0.0).to(tl.float32)
            b_tail = tl.load(b_ptr + tail, mask=tail_ok, other=0.0).to(tl.float32)
        y_tail = (d_tail - mean_d[:, None]) * inv_std[:, None] * w_tail[None, :] + b_tail[None, :]
        tl.store(y_rows + tail[None, :], y_tail.to(y_ptr.dtype.element_ty), mask=tail_mask)


def _split(n_cols: int) -> tuple[int, int]:
    """(head, tail): the largest power of two within the row, and the rest padded to a power of two."""
    head = 1 << (n_cols.bit_length() - 1)
    rest = n_cols - head
    return head, (triton.next_power_of_2(rest) if rest else 0)


MANY_ROWS = 1024
"""Above this many rows the call is bandwidth-bound (the rms_norm solution's measured split)."""


def _tile(n_rows: int, width: int) -> tuple[int, int, bool]:
    """(rows per program, warps, weight and bias loaded after the reductions) for rows ``width``
    lanes wide. Few rows: latency-bound, one row a program spread over up to 16 warps (16 for
    Falcon's 4608 lanes: 9 values a thread), so each thread's chain of loads, math and stores is
    short, and the weight and bias loads overlap the row's. Many rows: bandwidth-bound; 8 warps
    (18 values a thread for Falcon) and the weight and bias loaded late, so fewer registers are
    live across the reductions and more rows stay resident per SM. The H100 run of 2026-12-06
    timed the earlier rule (4 warps and the weight and bias loaded early for many rows) at 0.90x
    the baseline at 8,192 rows and 0.92x at 256; this one is argued, not yet timed:
    ``benchmarks/config_sweep.py --task falcon-7b-instruct__layer_norm`` times the choices."""
    if n_rows <= MANY_ROWS:
        return 1, max(4, min(16, width // 256)), False
    return max(1, min(16, 4096 // width)), max(4, min(8, width // 512)), True


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows = rows.shape[0]
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    head, tail = _split(hidden)
    rows_per_program, warps, late_affine = _tile(n_rows, head + tail)
    _layer_norm_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, weight.contiguous(), bias.contiguous(), y, rows.stride(0), y.stride(0), n_rows, hidden, eps,
        ROWS=rows_per_program, HEAD=head, TAIL=tail, LATE_AFFINE=late_affine, num_warps=warps,
    )
    return y.reshape(x.shape)
