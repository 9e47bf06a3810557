"""Baseline of the CPU demo's second kernel: SiLU-and-mul in plain Python loops over float32 NumPy rows.

Deliberately naive, as the CPU RMSNorm baseline is (one Python-level exp and multiply per
element), so that the CPU demo has two kernels with real headroom; the contract is the same as
every SiLU-and-mul task's, on NumPy arrays.
"""

import math

import numpy as np


def silu_and_mul(x: np.ndarray) -> np.ndarray:
    rows, width = x.shape
    half = width // 2
    out = np.empty((rows, half), dtype=np.float32)
    for row in range(rows):
        for col in range(half):
            gate = float(x[row, col])
            out[row, col] = gate / (1.0 + math.exp(-gate)) * float(x[row, half + col])
    return out
