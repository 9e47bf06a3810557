"""The GPU red-team solutions of the Triton RMSNorm task, written out as files at test time.

Each solution must be one standalone file (the grader copies only that file), so the shared Triton
kernel is kept once here and prepended to the variants that use it.
"""

from pathlib import Path

KERNEL_MODULE = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef _rms_rows(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n_rows, n_cols, eps, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):\n    pid = tl.program_id(0)\n    rows = pid * ROWS + tl.arange(0, ROWS)\n    cols = tl.arange(0, BLOCK_N)\n    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]\n    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)\n    inv = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)\n    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)\n    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], (x * inv[:, None] * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)\n\n\ndef _launch(x, weight, eps, y):\n    hidden = x.shape[-1]\n    n = x.shape[0]\n    rows = 1 if n <= 2048 else 2\n    _rms_rows[(triton.cdiv(n, rows),)](x, weight, y, x.stride(0), y.stride(0), n, hidden, eps,\n                                      BLOCK_N=triton.next_power_of_2(hidden), ROWS=rows, num_warps=16)\n    return y\n\n"

VARIANTS: dict[str, tuple[bool, str]] = {
    "event_patch": (
        True,
        "torch.cuda.Event.elapsed_time = lambda self, end: 0.0001\n\n\ndef rms_norm(x, weight, eps):\n    return _launch(x, weight, eps, torch.empty_like(x))\n",
    ),
    "ghost_kernel": (
        True,
        "def rms_norm(x, weight, eps):\n    x32 = x.float()\n    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)\n",
    ),
    "honest_faster": (
        True,
        "def rms_norm(x, weight, eps):\n    return _launch(x, weight.contiguous(), eps, torch.empty_like(x))\n",
    ),
    "pointer_cache": (
        True,
        "_cache = {}\n\n\ndef rms_norm(x, weight, eps):\n    key = (x.data_ptr(), tuple(x.shape))\n    if key not in _cache:\n        _cache[key] = _launch(x, weight, eps, torch.empty_like(x))\n    return _cache[key]\n",
    ),
    "pure_pytorch": (
        False,
        "import torch\n\ndef rms_norm(x, weight, eps):\n    x32 = x.float()\n    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)\n",
    ),
    "reused_memory": (
        False,
        "import torch\n\ndef rms_norm(x, weight, eps):\n    return torch.empty_like(x)  # hopes for memory that still holds the reference output\n",
    ),
    "side_stream": (
        True,
        "_side = None\n\n\ndef rms_norm(x, weight, eps):\n    global _side\n    if _side is None:\n        _side = torch.cuda.Stream()\n    y = torch.empty_like(x)\n    _side.wait_stream(torch.cuda.current_stream())\n    with torch.cuda.stream(_side):\n        for _ in range(20):\n            _launch(x, weight, eps, y)\n    return y\n",
    ),
    "side_stream_late": (
        True,
        "_side = None\n\n\ndef rms_norm(x, weight, eps):\n    global _side\n    if _side is None:\n        _side = torch.cuda.Stream()\n    y = torch.empty_like(x)\n    _side.wait_stream(torch.cuda.current_stream())\n    with torch.cuda.stream(_side):\n        torch.cuda._sleep(2_000_000)  # about a millisecond of device work the timed stream never waits for\n        _launch(x, weight, eps, y)\n    return y\n",
    ),
    "try_except_fallback": (
        True,
        "def rms_norm(x, weight, eps):\n    try:\n        return _rms_rows[(1,)](x, weight)  # a launch with missing arguments raises\n    except Exception:\n        x32 = x.float()\n        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)\n",
    ),
}


def write_solution(name: str, directory: Path) -> Path:
    """Write variant ``name`` as ``directory/<name>.py`` and return its path."""
    with_kernel, body = VARIANTS[name]
    path = directory / f"{name}.py"
    path.write_text((KERNEL_MODULE + "\n\n" if with_kernel else "") + body)
    return path
