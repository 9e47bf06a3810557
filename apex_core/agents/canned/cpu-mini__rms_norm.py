"""RMSNorm vectorized with NumPy: the answer `apex eval --dry-run` submits instead of an agent's.

It stands for what a competent agent writes for the CPU mini-task, so the whole pipeline (prompt,
solution file, grading, score) can be exercised without an LLM.
"""

import numpy as np


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    x32 = np.asarray(x, dtype=np.float32)
    mean_square = np.einsum("ij,ij->i", x32, x32, dtype=np.float64) / x32.shape[-1]
    inv_rms = (1.0 / np.sqrt(mean_square + eps)).astype(np.float32)
    return x32 * inv_rms[:, None] * np.asarray(weight, dtype=np.float32)
