"""Profiling any callable with torch.profiler: warm-up, timed calls without and with the profiler.

The callable is one unit of work (a workload's synchronized prefill+decode step, a kernel call);
this module knows nothing about workloads. The sequence is: ``warmup`` calls (compilation,
caches, allocator; not recorded), ``calls`` timed calls without the profiler, then ``calls``
timed calls under it, so the result reports the profiler's overhead beside the kernel table.
On a GPU every timed loop ends with a device synchronize, so wall times cover the device work.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Literal

import torch
from torch.profiler import ProfilerActivity, profile

from apex_core.errors import ApexUserError
from apex_core.profiling.modules import module_ranges
from apex_core.profiling.records import ProfileResult
from apex_core.profiling.torch_table import CpuGrouping, cpu_table, gpu_table

TRACE_FILE = "trace.json"


def resolve_device(device: str) -> str:
    """``auto`` is GPU 0 when torch sees one (CUDA or ROCm), else the CPU; ``cuda:N`` is GPU N."""
    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    kind, _, index = device.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise ApexUserError(f"unknown profiling device {device!r}: use 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if not torch.cuda.is_available():
        raise ApexUserError(f"device {device!r} was asked for but torch sees no CUDA or ROCm GPU here; use device 'cpu' or 'auto'")
    number = int(index or 0)
    if number >= torch.cuda.device_count():
        raise ApexUserError(f"device {device!r}: only {torch.cuda.device_count()} GPU(s) are visible; use cuda:0 .. "
                            f"cuda:{torch.cuda.device_count() - 1}")
    return f"cuda:{number}"


def _timed(fn: Callable[[], object], calls: int, sync: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return time.perf_counter() - start


def capture(
    fn: Callable[[], object],
    *,
    calls: int = 3,
    warmup: int = 1,
    device: str = "auto",
    trace_dir: Path | None = None,
    gzip_trace: bool = False,
    cpu_grouping: CpuGrouping = "module",
    attribute_modules: bool = True,
) -> ProfileResult:
    """Profile ``fn()`` and return its kernel table; with ``trace_dir``, also save the Chrome trace.

    ``cpu_grouping="module"`` puts a module's CPU ops in one row (``nn.Module: LlamaRMSNorm``);
    ``"op"`` keeps one row per op (with its module in ``module``). ``attribute_modules=False``
    skips the module hooks (the overhead then is torch.profiler's alone).
    """
    if calls < 1:
        raise ApexUserError(f"calls must be at least 1, got {calls}")
    if warmup < 0:
        raise ApexUserError(f"warmup must be 0 or more, got {warmup}")
    if cpu_grouping not in ("module", "op"):
        raise ApexUserError(f"unknown CPU grouping {cpu_grouping!r}: use 'module' or 'op'")
    resolved = resolve_device(device)
    on_gpu = resolved != "cpu"
    sync = (lambda: torch.cuda.synchronize(resolved)) if on_gpu else (lambda: None)

    for _ in range(warmup):
        fn()
    sync()
    unprofiled_s = _timed(fn, calls, sync)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities, record_shapes=True) as prof:
        with module_ranges() if attribute_modules else nullcontext() as ranges:
            profiled_s = _timed(fn, calls, sync)

    events = prof.events()
    notes: list[str] = []
    table_device: Literal["cpu", "cuda"] = "cuda" if on_gpu else "cpu"
    kernels = gpu_table(events) if on_gpu else []
    if on_gpu and not kernels:
        notes.append("no device kernels were recorded (the callable ran on the CPU?); the table lists CPU ops instead")
        table_device = "cpu"
    if table_device == "cpu":
        kernels = cpu_table(events, ranges, cpu_grouping)
    if not attribute_modules:
        notes.append("module attribution was off: ops are not grouped by module")

    trace_path = None
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace_path = trace_dir / (TRACE_FILE + (".gz" if gzip_trace else ""))
        prof.export_chrome_trace(str(trace_path))

    return ProfileResult(
        source="torch.profiler",
        device=table_device,
        device_name=torch.cuda.get_device_name(resolved) if on_gpu else cpu_name(),
        kernels=kernels,
        total_time_us=sum(record.total_time_us for record in kernels),
        warmup_calls=warmup,
        profiled_calls=calls,
        profiled_wall_s=profiled_s,
        unprofiled_wall_s=unprofiled_s,
        trace_path=str(trace_path) if trace_path else None,
        torch_version=torch.__version__,
        notes=notes,
    )


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo where there is one, else what Python knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"
