"""Readers of other profilers' outputs, each into the same ``KernelRecord`` list as torch.profiler.

``read_kernels(path)`` recognizes the format from the file's content; ``read_kernels(path,
"nsys")`` forces one. Which formats were checked against real output, and which were written
from documentation only, is said in each reader's module docstring and in docs/profiling.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from apex_core.profiling.readers.common import ProfileFormatError, read_text
from apex_core.profiling.readers.nsight import read_ncu_csv, read_nsys_kern_sum
from apex_core.profiling.readers.rocprof import read_kernel_stats_csv, read_kernel_trace_csv, read_results_json
from apex_core.profiling.records import KernelRecord

READERS: dict[str, Callable[[Path], list[KernelRecord]]] = {
    "rocprofv3-kernel-trace": read_kernel_trace_csv,
    "rocprofv3-kernel-stats": read_kernel_stats_csv,
    "rocprofv3-json": read_results_json,
    "nsys": read_nsys_kern_sum,
    "ncu": read_ncu_csv,
}


def detect_format(path: Path) -> str:
    """The reader a file needs, from what its first lines hold."""
    text = read_text(path, "a profiler output (" + ", ".join(READERS) + ")")
    head = text[:20000]
    if head.lstrip().startswith("{"):
        try:
            if "rocprofiler-sdk-tool" in json.loads(text):
                return "rocprofv3-json"
        except (json.JSONDecodeError, TypeError):
            pass
    elif "Kernel_Name" in head and "Start_Timestamp" in head:
        return "rocprofv3-kernel-trace"
    elif "TotalDurationNs" in head:
        return "rocprofv3-kernel-stats"
    elif "Total Time (" in head and "Instances" in head:
        return "nsys"
    elif '"ID"' in head and "Kernel Name" in head:
        return "ncu"
    raise ProfileFormatError(f"{path}: not a profiler output this reads; known formats: {', '.join(READERS)}")


def read_kernels(path: Path, fmt: str | None = None) -> list[KernelRecord]:
    """The kernel table in ``path``, read with the reader ``fmt`` names or the one its content needs."""
    if fmt is not None and fmt not in READERS:
        raise ProfileFormatError(f"unknown profiler format {fmt!r}; known: {', '.join(READERS)}")
    return READERS[fmt or detect_format(path)](path)


__all__ = ["READERS", "ProfileFormatError", "detect_format", "read_kernels"]
