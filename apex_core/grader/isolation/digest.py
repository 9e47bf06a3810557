"""A keyed checksum of an array's bits, for the judge's input-mutation check.

The worker, after a checked call, reports the checksum of every input argument under a key the
judge drew for that call; the judge computes the same checksums on the inputs it drew itself and
compares. So the verdict "the call left its inputs alone" is the judge's, made from evidence, not a
boolean the solution's process could simply assert; and no input travels back through the channel.

The checksum is a weighted sum of the bytes, with weights from an affine map of each byte's position
modulo a prime: integer arithmetic only, so the judge and the worker get the same number on any
device and in any summation order. Any change to a single byte changes it; a solution would have to
aim for a collision deliberately, which takes keeping the original inputs anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from apex_core.grader.isolation.payload import flat_bytes, is_array

PRIME = 16_777_213
"""The largest prime below 2**24: a byte (< 2**8) times a weight (< 2**24) stays below 2**32."""
CHUNK = 1 << 24
"""Bytes summed at once: a chunk's sum stays below 2**56, well inside int64."""


def _weights_sum(raw: Any, start: int, key: int, xp: Any, device: Any) -> int:
    """Sum of raw[i] * weight(start + i) over one chunk, as a Python int."""
    a, b = 1 + key % (PRIME - 1), (key >> 24) % PRIME
    if xp is np:
        positions = np.arange(start, start + raw.shape[0], dtype=np.int64)
        return int(((positions * a + b) % PRIME + 1).dot(raw.astype(np.int64)))
    positions = xp.arange(start, start + raw.shape[0], dtype=xp.int64, device=device)
    return int((((positions * a + b) % PRIME + 1) * raw.to(xp.int64)).sum())


def array_digest(value: Any, key: int) -> str:
    """dtype, shape and keyed checksum of ``value``'s logical contents (a view and a contiguous
    copy of it agree), computed on the device it lives on."""
    dtype, shape, flat = flat_bytes(value)
    xp: Any = np
    if not isinstance(flat, np.ndarray):
        import torch

        xp = torch
    device = getattr(flat, "device", None)
    total = 0
    for start in range(0, flat.shape[0], CHUNK):
        total = (total + _weights_sum(flat[start : start + CHUNK], start, key, xp, device)) % (1 << 64)
    return f"{dtype}{shape}:{total:016x}"


def input_digests(args: list[Any], key: int, skip: tuple[int, ...] = ()) -> list[str | None]:
    """One digest per array argument; None for the declared outputs (``skip``) and plain values."""
    return [array_digest(arg, key) if position not in skip and is_array(arg) else None for position, arg in enumerate(args)]
