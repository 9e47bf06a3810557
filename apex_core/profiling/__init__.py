"""The profiler: where a callable's device time goes, as a kernel table and a Chrome trace.

``capture(fn)`` profiles any callable with torch.profiler (device kernels on a GPU, CPU ops by
module on the CPU); ``read_kernels(path)`` reads rocprofv3 and Nsight outputs into the same
``KernelRecord`` table; ``save_profile``/``load_profile`` keep a run's ``profile.json`` beside
its ``trace.json``; ``names`` demangles and shortens kernel names. See docs/profiling.md.
"""

import importlib
from typing import Any

from apex_core.profiling.readers import ProfileFormatError, detect_format, read_kernels
from apex_core.profiling.records import KernelRecord, ProfileResult
from apex_core.profiling.store import PROFILE_FILE, load_profile, new_run_dir, save_profile

_FROM_CAPTURE = ("TRACE_FILE", "capture")


def __getattr__(name: str) -> Any:
    """``capture`` and ``TRACE_FILE`` on first use: ``torch_capture.py`` imports PyTorch (1.7 s on
    the CI machine), and what only reads profiles or names kernels (the source server, ``apex
    source``) imports this package without ever profiling. (The module is not named ``capture``:
    the import system would bind that name to the module, over the function.)"""
    if name not in _FROM_CAPTURE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module("apex_core.profiling.torch_capture")
    values = {attribute: getattr(module, attribute) for attribute in _FROM_CAPTURE}
    globals().update(values)
    return values[name]


__all__ = [
    "PROFILE_FILE",
    "TRACE_FILE",
    "KernelRecord",
    "ProfileFormatError",
    "ProfileResult",
    "capture",
    "detect_format",
    "load_profile",
    "new_run_dir",
    "read_kernels",
    "save_profile",
]
