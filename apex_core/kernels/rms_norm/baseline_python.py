"""Baseline for the CPU mini-evaluation: RMSNorm in plain Python loops over float32 NumPy arrays.

Deliberately naive (one Python-level multiply per element) so that the evaluation has real
headroom on any machine; the contract is the same as every RMSNorm task's.
"""

import math

import numpy as np


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    rows, hidden = x.shape
    out = np.empty((rows, hidden), dtype=np.float32)
    for row in range(rows):
        total = 0.0
        for col in range(hidden):
            value = float(x[row, col])
            total += value * value
        inv_rms = 1.0 / math.sqrt(total / hidden + eps)
        for col in range(hidden):
            out[row, col] = float(x[row, col]) * inv_rms * float(weight[col])
    return out
