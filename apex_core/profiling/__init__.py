"""The profiler: where a callable's device time goes, as a kernel table and a Chrome trace.

``capture(fn)`` profiles any callable with torch.profiler (device kernels on a GPU, CPU ops by
module on the CPU); ``read_kernels(path)`` reads rocprofv3 and Nsight outputs into the same
``KernelRecord`` table; ``save_profile``/``load_profile`` keep a run's ``profile.json`` beside
its ``trace.json``; ``names`` demangles and shortens kernel names. See docs/profiling.md.
"""

from apex_core.profiling.capture import TRACE_FILE, capture
from apex_core.profiling.readers import ProfileFormatError, detect_format, read_kernels
from apex_core.profiling.records import KernelRecord, ProfileResult
from apex_core.profiling.store import PROFILE_FILE, load_profile, new_run_dir, save_profile

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
