"""Our SiLU-and-mul (bf16): the bar to beat. Llama-3.1-8B (intermediate 14336), Qwen3.5-27B (17408)
and DeepSeek-R1's routed experts (tokens x 8 rows of 2 x 2048).

What it changes from the baseline, and why that is faster:
- The baseline gives each row one program that walks the columns in sequential 1024-wide blocks
  (14 for Llama), each a full memory round trip that the loop waits out before the next block
  (there is no dot for Triton's pipeliner to overlap). Here the grid spans rows and column blocks:
  for a decode batch the work is that many times more parallel and each program makes a single
  round trip, so decode calls drop from many latencies to about one.
- At serving and prefill sizes each program owns a 4 x 1024 tile (over the model's warps), 16-byte
  vector loads of gate and up all issued before any math, so every SM keeps enough bytes in flight
  to run at HBM bandwidth instead of stalling once per 1024-column block.
- Column blocks are the fast grid axis, so consecutive programs stream consecutive memory.
Numerics are the baseline's: silu(gate) * up in fp32, one rounding to bf16.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_tiles(
    x_ptr, out_ptr, n_rows, d, x_row_stride, out_row_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # Axis 0 walks the columns so that neighbouring programs touch neighbouring memory.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & (cols < d)[None, :]
    gate_ptrs = x_ptr + rows[:, None] * x_row_stride + cols[None, :]
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_ptrs + d, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


# apex:model-constants


def _tile(n_rows: int) -> tuple[int, int, int]:
    """(rows, columns, warps) of a program. Few rows: one row per tile, so the columns alone spread
    the work over the GPU. Many rows: 4-row tiles, enough independent loads in flight to saturate
    HBM, over MANY_ROWS_WARPS warps."""
    return (1, 1024, 4) if n_rows <= 64 else (4, 1024, MANY_ROWS_WARPS)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * d)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    n_rows = rows.shape[0]
    out = torch.empty((n_rows, d), dtype=x.dtype, device=x.device)
    block_m, block_n, warps = _tile(n_rows)
    grid = (triton.cdiv(d, block_n), triton.cdiv(n_rows, block_m))
    _silu_and_mul_tiles[grid](
        rows, out, n_rows, d, rows.stride(0), out.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps
    )
    return out.reshape(*x.shape[:-1], d)
