"""What this device actually sustains: copy bandwidth and dense matmul rate, measured here.

Datasheet peaks are ceilings no kernel reaches; a reference solution is judged against what the
device really does (the issue's bar: memory-bound solutions reach 80% of the measured copy
bandwidth). Both figures are measured once per process with events, after a warm-up, as the
median of several repetitions.
"""

from __future__ import annotations

import statistics
from functools import lru_cache

from pydantic import BaseModel


class MeasuredRates(BaseModel):
    device: str
    copy_bandwidth_bytes_per_s: float
    """Device-to-device copy, counting the bytes read plus the bytes written."""
    matmul_flops_per_s: dict[str, float]
    """Dense GEMM rate per dtype at a large square size."""


def _median_event_ms(fn, repeats: int = 20) -> float:
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth(device: str = "cuda", megabytes: int = 1024) -> float:
    """Bytes per second of a large device-to-device copy (read + write)."""
    import torch

    source = torch.empty(megabytes * 1024**2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    milliseconds = _median_event_ms(lambda: target.copy_(source))
    return 2 * source.numel() / (milliseconds / 1e3)


def matmul_rate(dtype: str, device: str = "cuda", size: int = 8192) -> float:
    """FLOP/s of a square GEMM of ``size`` in ``dtype`` (fp8 through torch._scaled_mm where present)."""
    import torch

    if dtype.startswith("float8"):
        fp8 = getattr(torch, dtype)
        a = torch.randn(size, size, device=device).to(fp8)
        b = torch.randn(size, size, device=device).to(fp8).t()
        one = torch.ones((), device=device)
        milliseconds = _median_event_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    else:
        torch_dtype = getattr(torch, dtype)
        a = torch.randn(size, size, device=device, dtype=torch_dtype)
        b = torch.randn(size, size, device=device, dtype=torch_dtype)
        milliseconds = _median_event_ms(lambda: a @ b)
    return 2 * size**3 / (milliseconds / 1e3)


@lru_cache(maxsize=4)
def measured_rates(device: str = "cuda", dtypes: tuple[str, ...] = ("bfloat16", "float8_e4m3fn")) -> MeasuredRates:
    import torch

    # Events are recorded on the current device's stream: measuring 'cuda:1' from a process whose
    # current device is 0 would time an empty stream (absurd "copies" of over 100 TB/s).
    with torch.cuda.device(torch.device(device)):
        rates = {}
        for dtype in dtypes:
            try:
                rates[dtype] = matmul_rate(dtype, device)
            except (RuntimeError, AttributeError, TypeError):
                continue  # this device or torch build has no GEMM for this dtype
        copy = copy_bandwidth(device)
    return MeasuredRates(device=device, copy_bandwidth_bytes_per_s=copy, matmul_flops_per_s=rates)
