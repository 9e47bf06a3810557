"""Our LayerNorm (bf16): the bar to beat. Falcon-7B (hidden 4544).

What it changes from the baseline, and why:
- One pass over the row's registers instead of two dependent ones. The baseline reduces the mean,
  waits for it, then reduces the variance of the centred row: two cross-warp exchanges in a row.
  Here the sum and the sum of squares are independent reductions of the same values, issued
  together. To keep the one-pass variance exact enough in fp32, both sums are taken of x minus the
  row's first element, a shift that sits within a few deviations of the mean, so E[d²] - E[d]²
  cancels little (about a bit of fp32 on typical rows, far below bf16's rounding). One reciprocal
  square root instead of a square root and a division.
- Decode batches hold the row as a power-of-two head (4096) and a masked tail (448 of 512) instead
  of the baseline's 8192-wide block, 45% of it masked, spread over 16 warps with the weight and bias
  issued with the row: each thread's chain of loads, math and stores is short.
- Larger batches hold the row as the baseline does, in one padded block, 4 warps, weight and bias
  loaded after the reductions (fewer registers live across them).
What was measured (``_tile``): on an H100 (2026-12-06) the split row was faster at 4 rows and slower
at 256 and 8,192 rows under every launch choice tried, so larger batches now take the padded block;
that rule is not yet timed (docs/tasks.md).
Numerics: fp32 statistics and math, one rounding to the output dtype.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_rows(
    x_ptr, w_ptr, b_ptr, y_ptr, stride_x, stride_y, n_rows, n_cols, eps,
    ROWS: tl.constexpr, HEAD: tl.constexpr, TAIL: tl.constexpr, LATE_AFFINE: tl.constexpr, PADDED: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    x_rows = x_ptr + rows[:, None] * stride_x
    y_rows = y_ptr + rows[:, None] * stride_y
    head = tl.arange(0, HEAD)
    # Split: HEAD <= n_cols, so the head needs no column mask. Padded: the whole row in one masked
    # power-of-two block, as the baseline holds it (no tail).
    head_ok = head < n_cols if PADDED else head < HEAD
    head_mask = row_ok[:, None] & head_ok[None, :]
    x_head = tl.load(x_rows + head[None, :], mask=head_mask, other=0.0)
    if not LATE_AFFINE:
        w_head = tl.load(w_ptr + head, mask=head_ok, other=0.0).to(tl.float32)
        b_head = tl.load(b_ptr + head, mask=head_ok, other=0.0).to(tl.float32)
    shift = tl.load(x_ptr + rows * stride_x, mask=row_ok, other=0.0).to(tl.float32)
    d_head = x_head.to(tl.float32) - shift[:, None]
    if PADDED:
        d_head = tl.where(head_mask, d_head, 0.0)
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
        w_head = tl.load(w_ptr + head, mask=head_ok, other=0.0).to(tl.float32)
        b_head = tl.load(b_ptr + head, mask=head_ok, other=0.0).to(tl.float32)
    y_head = (d_head - mean_d[:, None]) * inv_std[:, None] * w_head[None, :] + b_head[None, :]
    tl.store(y_rows + head[None, :], y_head.to(y_ptr.dtype.element_ty), mask=head_mask)
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


DECODE_ROWS = 16
"""Up to this many rows (decode batches) the split row measured faster; beyond it did not."""


def _tile(n_rows: int, width: int) -> tuple[int, int, bool, bool]:
    """(rows per program, warps, weight and bias loaded after the reductions, row held padded) for
    rows ``width`` lanes wide (the split's head and tail).

    The H100 of 2026-12-06 timed the split row against the baseline (config_sweep.py,
    benchmarks/results/sweep-layer-norm-h100-2026-12-06-6b4a6b2/): faster only at 4 rows, with 16
    warps (6.30 us against 6.54); at 256 and 8,192 rows every split choice lost (best 0.95x and 0.90x),
    while the baseline's single padded block with 4 warps and the affine loaded late ran 60.7 us at
    8,192 rows. So up to DECODE_ROWS rows the split with up to 16 warps; beyond, the padded block
    with the baseline's launch, keeping the one-pass statistics and the reciprocal square root. The
    padded rule is argued from that sweep, not yet timed: the sweep now times both."""
    if n_rows <= DECODE_ROWS:
        return 1, max(4, min(16, width // 256)), False, False
    return 1, 4, True, True


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.reshape(-1, hidden)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows = rows.shape[0]
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    head, tail = _split(hidden)
    rows_per_program, warps, late_affine, padded = _tile(n_rows, head + tail)
    if padded:
        head, tail = triton.next_power_of_2(hidden), 0
    _layer_norm_rows[(triton.cdiv(n_rows, rows_per_program),)](
        rows, weight.contiguous(), bias.contiguous(), y, rows.stride(0), y.stride(0), n_rows, hidden, eps,
        ROWS=rows_per_program, HEAD=head, TAIL=tail, LATE_AFFINE=late_affine, PADDED=padded, num_warps=warps,
    )
    return y.reshape(x.shape)
