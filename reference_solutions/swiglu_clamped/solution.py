"""Our clamped SwiGLU for GPT-OSS-20B (routed rows of 2 x 2880 interleaved gate/linear, bf16).

The bar an agent's solution is measured against.

What it changes from the baseline, and why that is faster:
- Each (gate, linear) pair of bf16 values is read as one 32-bit word: the row is loaded as a
  contiguous int32 tile (16-byte vector loads, four pairs each) and the two halves are turned into
  fp32 with a shift and a mask. bf16 is the top half of an fp32, so this is exact; on a
  little-endian GPU the even (gate) element is the low half. The baseline's two stride-2 loads are
  2-byte accesses that cannot be vectorized, twice as many load instructions for the same bytes.
- The grid spans rows and 1024-column blocks instead of one program walking a row's 2880 columns
  in three sequential blocks, each a memory round trip the loop waits out. At decode sizes (16
  routed rows for 4 tokens) that is three times the parallelism and one round trip instead of
  three; at prefill sizes 4-row tiles keep 32 outputs per thread in flight.
- Column blocks are the fast grid axis, so consecutive programs stream consecutive memory.
Numerics are the baseline's: clamp, x_glu * sigmoid(alpha * x_glu) * (x_linear + 1) in fp32, one
rounding to bf16.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu_clamped_tiles(
    pairs_ptr, out_ptr, n_rows, d, pairs_row_stride, out_row_stride, alpha, limit,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & (cols < d)[None, :]
    pairs = tl.load(pairs_ptr + rows[:, None] * pairs_row_stride + cols[None, :], mask=mask, other=0)
    # Low half: the gate (even column); high half: the linear value (odd column).
    x_glu = (pairs << 16).to(tl.float32, bitcast=True)
    x_linear = (pairs & -65536).to(tl.float32, bitcast=True)
    x_glu = tl.minimum(x_glu, limit)
    x_linear = tl.minimum(tl.maximum(x_linear, -limit), limit)
    out = x_glu / (1.0 + tl.exp(-alpha * x_glu)) * (x_linear + 1.0)
    tl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu_clamped(x: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    if x.dtype != torch.bfloat16:
        raise TypeError(f"this kernel reads bf16 pairs as 32-bit words; got {x.dtype}")
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d)
    if rows.stride(-1) != 1 or rows.storage_offset() % 2:
        rows = rows.contiguous()
    pairs = rows.view(torch.int32)  # (n_rows, d): one (gate, linear) pair per word
    n_rows = rows.shape[0]
    out = torch.empty((n_rows, d), dtype=x.dtype, device=x.device)
    block_n = 1024
    block_m = 1 if n_rows <= 64 else 4
    grid = (triton.cdiv(d, block_n), triton.cdiv(n_rows, block_m))
    _swiglu_clamped_tiles[grid](
        pairs, out, n_rows, d, pairs.stride(0), out.stride(0), alpha, limit,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4,
    )
    return out.reshape(*x.shape[:-1], d)
