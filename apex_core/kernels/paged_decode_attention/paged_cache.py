"""A paged KV cache as vLLM-style serving engines leave it: fixed-size blocks and a table per sequence.

Decode attention (GQA and MLA) reads each sequence's keys through its row of a block table: token
``t`` lives in physical block ``block_tables[seq, t // block_size]`` at slot ``t % block_size``.
The engine hands blocks out from a free list, so a sequence's blocks are scattered across the
cache; block 0 is the engine's reserved null block, which padded table entries and (under a
sliding window) the entries of freed, out-of-window blocks point at. These helpers build such a
cache for the input generators: lengths near a shape's context, block ids in random order, and a
cache whose unused slots hold stale data, so a kernel that reads past a sequence's end or outside
its window gets a wrong answer instead of a lucky zero.

Sequence lengths are drawn from a generator seeded by the shape alone: every input set of a shape
does the same amount of work, which keeps timings comparable and lets the roofline count the exact
bytes of a shape.
"""

from __future__ import annotations

from typing import Any
from apex_core.kernels import seeded

NULL_BLOCK = 0
"""The reserved block that padded and freed block-table entries point at (vLLM's null block)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def context_lengths(batch: int, context: int, salt: int = 0) -> list[int]:
    """Lengths of ``batch`` sequences near ``context``: the first exactly ``context`` (so the shape's
    maximum occurs), the others uniform in [3/4 context, context]; a fixed function of the shape."""
    import torch

    generator = seeded.generator(1_000_003 * batch + 7919 * context + salt)
    low = max(1, (3 * context) // 4)
    lengths = torch.randint(low, context + 1, (batch,), generator=generator).tolist()
    lengths[0] = context
    return [int(n) for n in lengths]


def live_blocks(seq_len: int, block_size: int, sliding_window: int = 0) -> range:
    """Logical blocks a sequence still holds: all of them, or under a sliding window only those that
    hold one of the last ``sliding_window`` positions (the engine frees the others)."""
    first_position = max(0, seq_len - sliding_window) if sliding_window > 0 else 0
    return range(first_position // block_size, cdiv(seq_len, block_size))


def attended_lengths(seq_lens: list[int], sliding_window: int = 0) -> list[int]:
    """Keys each sequence's decode query attends to: its length, capped by the window if any."""
    return [min(n, sliding_window) if sliding_window > 0 else n for n in seq_lens]


def build_block_tables(
    seq_lens: list[int], block_size: int, generator: Any, sliding_window: int = 0
) -> tuple[Any, int]:
    """A block table (batch, max blocks per sequence) int32 and the number of physical blocks.

    Live blocks get distinct ids in random order (a free list after some churn); every other entry
    is the null block. About 1/8 extra blocks stand for other sequences' data.
    """
    import torch

    widths = [cdiv(n, block_size) for n in seq_lens]
    live = [live_blocks(n, block_size, sliding_window) for n in seq_lens]
    used = sum(len(r) for r in live)
    num_blocks = 1 + used + max(1, used // 8)
    order = (torch.randperm(num_blocks - 1, generator=generator) + 1).tolist()
    table = torch.full((len(seq_lens), max(widths)), NULL_BLOCK, dtype=torch.int32)
    next_free = 0
    for seq, blocks in enumerate(live):
        for logical in blocks:
            table[seq, logical] = order[next_free]
            next_free += 1
    return table, num_blocks
