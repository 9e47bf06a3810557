"""Numerics shared by the kernel references."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def exact_fp32_matmuls() -> Iterator[None]:
    """fp32 matmuls without TF32, whatever the process-wide setting is.

    A reference computed with TF32 (10-bit mantissa) would itself be off by more than the bf16
    tolerances it is meant to enforce.
    """
    import torch

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
