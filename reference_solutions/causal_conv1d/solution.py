"""Our causal conv1d (width 4) + SiLU for Qwen3.5-27B's linear-attention inputs (10240 channels, bf16).

What it changes from the baseline, and why that is faster:
- The time axis is tiled: one program per (32-token tile, 256-channel block, sequence) instead of
  one serial sweep per channel block. A 16K-token prefill becomes 20K independent programs that
  fill every compute unit, instead of 40 programs each waiting on 16K dependent load round trips.
- Inside a tile there is no loop: the four taps are four shifted (32 x 256) tile loads of the
  same rows (the 3-row halo and the overlaps come from L1/L2; HBM sees each input about once), so
  every thread issues all its 16-byte loads up front and the memory system stays full.
- Channels are the contiguous axis, so each tile row is a 512-byte run loaded with 16-byte
  vectors; weights are loaded once per program.
At prefill sizes the kernel should run near the copy bandwidth: it reads x once and writes out once.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_tiles(x_ptr, w_ptr, out_ptr, seqlen, dim, x_batch_stride, out_batch_stride,
                         BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, WIDTH: tl.constexpr):
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    channels = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    batch = tl.program_id(2).to(tl.int64)
    channel_mask = channels < dim
    x_base = x_ptr + batch * x_batch_stride
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    for j in tl.static_range(WIDTH):
        # Tap j multiplies the input (WIDTH - 1 - j) tokens back; rows before token 0 are zero.
        source = tokens - (WIDTH - 1 - j)
        mask = ((source >= 0) & (source < seqlen))[:, None] & channel_mask[None, :]
        x = tl.load(x_base + source.to(tl.int64)[:, None] * dim + channels[None, :], mask=mask, other=0.0)
        w = tl.load(w_ptr + channels * WIDTH + j, mask=channel_mask, other=0.0).to(tl.float32)
        acc += x.to(tl.float32) * w[None, :]
    out = acc / (1.0 + tl.exp(-acc))
    out_mask = (tokens < seqlen)[:, None] & channel_mask[None, :]
    out_offs = batch * out_batch_stride + tokens.to(tl.int64)[:, None] * dim + channels[None, :]
    tl.store(out_ptr + out_offs, out.to(out_ptr.dtype.element_ty), mask=out_mask)


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x, weight = x.contiguous(), weight.contiguous()
    batch, seqlen, dim = x.shape
    out = torch.empty_like(x)
    if x.numel() == 0:
        return out
    block_t = 32 if seqlen >= 32 else triton.next_power_of_2(seqlen)
    block_n = 256
    grid = (triton.cdiv(seqlen, block_t), triton.cdiv(dim, block_n), batch)
    _causal_conv1d_tiles[grid](
        x, weight, out, seqlen, dim, x.stride(0), out.stride(0),
        BLOCK_T=block_t, BLOCK_N=block_n, WIDTH=weight.shape[1], num_warps=8 if block_t * block_n >= 8192 else 4,
    )
    return out
