"""The hardware model: what the machine has, what the target can do, and where each number comes from."""

from apex_core.hardware.detect import DetectedDevice, detect
from apex_core.hardware.specs import GPU_SPECS, GpuSpec
from apex_core.hardware.target import HardwareTarget, resolve_target, spec_for_name

__all__ = ["GPU_SPECS", "DetectedDevice", "GpuSpec", "HardwareTarget", "detect", "resolve_target", "spec_for_name"]
