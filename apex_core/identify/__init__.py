"""The identifier: which kernels take the device time, what each is, and which of our tasks it is.

Pipeline stage 2 (benchmark -> identify -> optimize). Input: a profile's kernel table (anything
with ``ProfiledKernel``'s fields), the workload's model and dtype, optionally a ``ShapeRecording``
of the live model. Output: ``IdentifiedKernel``s. docs/identify.md explains each decision.
"""

from apex_core.identify.identifier import DEFAULT_TOP_K, identify, identify_row, recording_sites
from apex_core.identify.kinds import KERNEL_KINDS, KERNEL_TYPES, kernel_type, kind_from_module, kind_from_name
from apex_core.identify.profile import ProfiledKernel, read_profile
from apex_core.identify.recorder import ArgSpec, CallRecord, CallSite, ModuleSource, ShapeRecording, TensorSpec, record_calls
from apex_core.identify.result import IdentifiedKernel
from apex_core.identify.task_map import matching_tasks, normalize_dtype

__all__ = [
    "DEFAULT_TOP_K",
    "KERNEL_KINDS",
    "KERNEL_TYPES",
    "ArgSpec",
    "CallRecord",
    "CallSite",
    "IdentifiedKernel",
    "ModuleSource",
    "ProfiledKernel",
    "ShapeRecording",
    "TensorSpec",
    "identify",
    "identify_row",
    "kernel_type",
    "kind_from_module",
    "kind_from_name",
    "matching_tasks",
    "normalize_dtype",
    "read_profile",
    "record_calls",
    "recording_sites",
]
