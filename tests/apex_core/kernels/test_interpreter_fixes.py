"""The interpreter corrections make bf16 dots and fp8 casts match the GPU's arithmetic."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]

_PROBE = textwrap.dedent(
    """
    import sys, torch, triton, triton.language as tl
    if sys.argv[1] == "fixed":
        from apex_core.kernels import interpreter_fixes
        interpreter_fixes.apply()

    @triton.jit
    def dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        rows = tl.arange(0, N)
        a = tl.load(a_ptr + rows[:, None] * N + rows[None, :])
        b = tl.load(b_ptr + rows[:, None] * N + rows[None, :])
        tl.store(c_ptr + rows[:, None] * N + rows[None, :], tl.dot(a, b))

    @triton.jit
    def to_fp8(x_ptr, y_ptr, N: tl.constexpr):
        offsets = tl.arange(0, N)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets).to(tl.float8e4nv))

    a = torch.randn(16, 16).to(torch.bfloat16)
    b = torch.randn(16, 16).to(torch.bfloat16)
    c = torch.empty(16, 16)
    dot[(1,)](a, b, c, N=16)
    dot_error = (c - a.float() @ b.float()).abs().max().item()
    x = torch.tensor([125.7, -125.7, 3.3, 1000.0] + [0.5] * 12)
    y = torch.empty(16, dtype=torch.float8_e4m3fn)
    to_fp8[(1,)](x, y, N=16)
    fp8_error = (y.float() - x.clamp(-448, 448).to(torch.float8_e4m3fn).float()).abs().max().item()
    print(dot_error, fp8_error)
    """
)


def _probe(mode: str) -> tuple[float, float]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    dot_error, fp8_error = map(float, done.stdout.split())
    return dot_error, fp8_error


def test_with_the_fixes_bf16_dots_and_fp8_casts_are_exact():
    dot_error, fp8_error = _probe("fixed")
    assert dot_error < 1e-4 and fp8_error == 0.0


def test_without_the_fixes_the_interpreter_is_still_wrong_so_the_fixes_are_needed():
    dot_error, fp8_error = _probe("plain")
    assert dot_error > 1.0 or fp8_error > 0.0


_AUTOTUNED = textwrap.dedent(
    """
    import sys, torch, triton, triton.language as tl
    if sys.argv[1] == "fixed":
        from apex_core.kernels import interpreter_fixes
        interpreter_fixes.apply()

    @triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 16})], key=["n"])
    @triton.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

    x = torch.arange(20, dtype=torch.float32)
    y = torch.empty_like(x)
    double[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, y, 20)
    print(bool(torch.equal(y, 2 * x)))
    """
)


def _run_autotuned(mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-c", _AUTOTUNED, mode], env=env, capture_output=True, text=True, timeout=300)


def test_with_the_fixes_an_autotuned_kernel_runs_under_the_interpreter():
    done = _run_autotuned("fixed")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


def test_without_the_fixes_an_autotuned_kernel_fails_for_want_of_a_gpu_driver():
    done = _run_autotuned("plain")
    assert done.returncode != 0 and "active drivers" in done.stderr
