"""Choosing the hardware a task is optimized for.

The target is, in order: what ``--gpu`` names (an arch such as ``gfx942`` or a product such as
``mi325x``), else the detected GPU, else gfx950 (MI355X), the product Apex is built for. A detected
GPU that the spec table does not know keeps its detected facts but has no peak numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from apex_core.errors import UnknownNameError
from apex_core.hardware.detect import DetectedDevice, detect
from apex_core.hardware.specs import DEFAULT_PRODUCT_FOR_ARCH, DEFAULT_TARGET, GPU_SPECS, SPECS_BY_KEY, GpuSpec

TargetOrigin = Literal["override", "detected", "default"]


class HardwareTarget(BaseModel):
    """The GPU Apex optimizes for, how it was chosen, and what this machine actually has."""

    spec: GpuSpec | None
    origin: TargetOrigin
    detected: DetectedDevice
    requested: str | None = None

    @property
    def arch(self) -> str:
        if self.spec is not None:
            return self.spec.arch
        return self.detected.arch or "unknown"

    @property
    def runs_here(self) -> bool:
        """Whether timings on this machine speak for the target (same arch as the detected GPU)."""
        return self.detected.vendor != "cpu" and self.detected.arch == self.arch


def known_gpu_names() -> list[str]:
    return sorted({spec.key for spec in GPU_SPECS} | {spec.arch for spec in GPU_SPECS})


def spec_for_name(name: str) -> GpuSpec:
    """An arch (``gfx950``, ``sm_90``) or product key (``mi355x``, ``h200``), any case."""
    wanted = name.strip().lower().replace("-", "").replace(" ", "")
    if wanted.startswith("amdinstinct"):
        wanted = wanted.removeprefix("amdinstinct")
    if wanted in SPECS_BY_KEY:
        return SPECS_BY_KEY[wanted]
    if wanted in DEFAULT_PRODUCT_FOR_ARCH:
        return SPECS_BY_KEY[DEFAULT_PRODUCT_FOR_ARCH[wanted]]
    raise UnknownNameError("GPU arch or product", name, known_gpu_names())


def spec_for_detected(device: DetectedDevice) -> GpuSpec | None:
    """Match a detected GPU to the table by product name first, then by arch."""
    if device.vendor == "cpu":
        return None
    name = device.product_name.lower().replace(" ", "")
    for spec in GPU_SPECS:
        if spec.vendor == device.vendor and any(p in name for p in spec.name_patterns):
            return spec
    if device.arch in DEFAULT_PRODUCT_FOR_ARCH:
        return SPECS_BY_KEY[DEFAULT_PRODUCT_FOR_ARCH[device.arch]]
    return None


def resolve_target(gpu: str | None = None, detected: DetectedDevice | None = None) -> HardwareTarget:
    """The target for this run; raises UnknownNameError for a ``gpu`` the table does not know."""
    device = detected if detected is not None else detect()
    if gpu:
        return HardwareTarget(spec=spec_for_name(gpu), origin="override", detected=device, requested=gpu)
    if device.vendor != "cpu":
        return HardwareTarget(spec=spec_for_detected(device), origin="detected", detected=device)
    return HardwareTarget(spec=spec_for_name(DEFAULT_TARGET), origin="default", detected=device)
