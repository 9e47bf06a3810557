"""Our weight-only MXFP4 GEMM (GPT-OSS's expert gate_up projection, K 2880, N 5760): the bar an
agent's solution is measured against.

y = x @ dequant(W)^T with W packed two E2M1 codes a byte (low nibble first) and one E8M0 scale per
32 values along K. What it changes from the baseline (32x64 tiles, one 32-wide MX block per K step, no split), and
why that should be faster (it is correct under the CPU interpreter; its speed is not yet measured
on a GPU):
- Decode (M <= 64, the tokens one expert gets): streaming the weight is the whole cost. A K step
  of several MX blocks (6 at K 2880: 15 steps) and 3 pipeline stages keep more weight bytes in
  flight per program, and split-K cuts the K loop into up to 4 pieces so that there are at least
  two programs per SM (N 5760 gives only 90 column tiles of 64). The pieces' fp32 partial sums go to
  a workspace and a second small kernel adds them in a fixed order (deterministic) and rounds to bf16.
  The row tile is as small as the dot allows (16) for 1-16 tokens.
- Prefill (M > 64): 64-128 x 128 tiles and 8 warps: the decode of each weight is shared by 2-4x
  more rows than in the baseline's 32-row tile, and the dots are larger.
- Each MX block's scale is loaded once per row per block and applied where it costs least: with a
  16-row tile, to the block's (16, BLOCK_N) dot result (exact: a power of two) instead of to its
  BLOCK_N x 32 weights; with larger row tiles, to the weights before the dot, as the baseline does.
- K steps need not divide K: the blocks of a step are loaded one by one, a block past K loads zeros.
"""

import functools

import torch
import triton
import triton.language as tl

_DEFAULT_SMS = 132


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _multiprocessors(x: torch.Tensor) -> int:
    if not x.is_cuda:
        return _DEFAULT_SMS
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return _sm_count(index)


@triton.jit
def _e2m1_to_float(code):
    """4-bit E2M1 code (int32) -> fp32 (exact), by building its bits: sign, exponent, mantissa."""
    magnitude = code & 7
    exponent = magnitude >> 1
    mantissa = magnitude & 1
    bits = tl.where(exponent == 0, mantissa * (126 << 23), ((exponent + 126) << 23) | (mantissa << 22))
    bits = bits | ((code >> 3) << 31)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _mxfp4_kernel(
    x_ptr, w_ptr, s_ptr, out_ptr, M, N, K, steps_per_split,
    stride_xm, stride_wn, stride_sn, stride_om, stride_split,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUPS: tl.constexpr, SPLIT_K: tl.constexpr,
    SCALE_PARTIAL: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    BLOCK_K: tl.constexpr = GROUPS * 32
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, 16)
    mask_m = offs_m < M
    mask_n = offs_n < N
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm
    w_rows = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn
    s_rows = s_ptr + offs_n.to(tl.int64) * stride_sn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    first = pid_k * steps_per_split
    last = tl.minimum(first + steps_per_split, tl.cdiv(K, BLOCK_K))
    for step in range(first, last):
        for g in tl.static_range(GROUPS):
            # One MX block: 16 bytes a weight row, one scale a row. A block past K (the last step
            # of a K that is not a multiple of BLOCK_K) loads zeros and adds nothing.
            k0 = step * BLOCK_K + g * 32
            cols = k0 + 2 * offs_j
            in_k = cols < K  # all true or all false: K is a multiple of 32
            x_mask = mask_m[:, None] & in_k[None, :]
            x_even = tl.load(x_rows + cols[None, :], mask=x_mask, other=0.0)
            x_odd = tl.load(x_rows + cols[None, :] + 1, mask=x_mask, other=0.0)
            packed = tl.load(w_rows + (k0 // 2 + offs_j)[None, :], mask=mask_n[:, None] & in_k[None, :], other=0)
            packed = packed.to(tl.int32)
            e8m0 = tl.load(s_rows + k0 // 32, mask=mask_n & (offs_n * 0 + k0 < K), other=127)
            scale = (e8m0.to(tl.int32) << 23).to(tl.float32, bitcast=True)
            w_even = _e2m1_to_float(packed & 15)
            w_odd = _e2m1_to_float(packed >> 4)
            if SCALE_PARTIAL:
                # Few rows: scaling the (BLOCK_M, BLOCK_N) partial is cheaper than BLOCK_N x 32 weights.
                part = tl.dot(x_even, tl.trans(w_even.to(tl.bfloat16)))
                part = tl.dot(x_odd, tl.trans(w_odd.to(tl.bfloat16)), part)
                acc += part * scale[None, :]
            else:
                acc = tl.dot(x_even, tl.trans((w_even * scale[:, None]).to(tl.bfloat16)), acc)
                acc = tl.dot(x_odd, tl.trans((w_odd * scale[:, None]).to(tl.bfloat16)), acc)
    out_ptrs = out_ptr + pid_k.to(tl.int64) * stride_split + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    if SPLIT_K == 1:
        tl.store(out_ptrs, acc.to(tl.bfloat16), mask=mask)
    else:
        tl.store(out_ptrs, acc, mask=mask)


@triton.jit
def _reduce_splits_kernel(part_ptr, y_ptr, total, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptr + split * total + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc.to(tl.bfloat16), mask=mask)


def _config(m: int, n: int, k: int, sms: int) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, GROUPS, SPLIT_K, num_warps, num_stages) for a shape; a K step is GROUPS
    MX blocks of 32 (any count: the blocks are loaded one by one, so it need not be a power of two)."""
    blocks = k // 32
    if m <= 64:
        block_m = 16 if m <= 16 else (32 if m <= 32 else 64)
        block_n = 64
        # A K step that divides K where one does (K 2880 = 90 blocks: 6 a step, 15 steps).
        groups = next((g for g in (6, 8, 5, 4, 3) if blocks % g == 0), 4)
        steps = triton.cdiv(blocks, groups)
        tiles = triton.cdiv(n, block_n) * triton.cdiv(m, block_m)
        split = 1
        while tiles * split < 2 * sms and steps >= 4 * split:  # at least 2 steps a split
            split *= 2
        return block_m, block_n, groups, split, 4, 3
    block_m = 64 if m <= 256 else 128
    return block_m, 128, 2, 1, 8, 3


def gemm_mxfp4(x: torch.Tensor, w_packed: torch.Tensor, w_scale: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    n = w_packed.shape[0]
    assert k % 32 == 0 and w_packed.shape[1] * 2 == k and w_scale.shape == (n, k // 32)
    x = x.contiguous()
    w_packed = w_packed.contiguous()
    w_scale = w_scale.contiguous()
    y = torch.empty((m, n), dtype=torch.bfloat16, device=x.device)
    if m == 0:
        return y
    block_m, block_n, groups, split, warps, stages = _config(m, n, k, _multiprocessors(x))
    steps = triton.cdiv(k, 32 * groups)
    steps_per_split = triton.cdiv(steps, split)
    split = triton.cdiv(steps, steps_per_split)
    out = y if split == 1 else torch.empty((split, m, n), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(n, block_n), triton.cdiv(m, block_m), split)
    _mxfp4_kernel[grid](
        x, w_packed, w_scale, out, m, n, k, steps_per_split,
        x.stride(0), w_packed.stride(0), w_scale.stride(0), n, m * n,
        BLOCK_M=block_m, BLOCK_N=block_n, GROUPS=groups, SPLIT_K=split, SCALE_PARTIAL=block_m < 32,
        num_warps=warps, num_stages=stages,
    )
    if split > 1:
        total = m * n
        _reduce_splits_kernel[(triton.cdiv(total, 1024),)](out, y, total, SPLIT_K=split, BLOCK=1024)
    return y
