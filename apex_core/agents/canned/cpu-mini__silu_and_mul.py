"""SiLU-and-mul vectorized with NumPy: the answer `apex eval --dry-run` submits for the CPU demo's
second kernel, standing for what a competent agent writes (and the task's reference solution)."""

import numpy as np


def silu_and_mul(x: np.ndarray) -> np.ndarray:
    x32 = np.asarray(x, dtype=np.float32)
    half = x32.shape[-1] // 2
    gate, up = x32[:, :half], x32[:, half:]
    return (gate / (1.0 + np.exp(-gate)) * up).astype(np.float32)
