"""The roofline model of a kernel call: bytes that must move and FLOPs that must be done.

A call cannot finish faster than max(bytes / peak bandwidth, FLOPs / peak FLOP/s); a measured time
below that floor means the measurement, not the kernel, is wrong.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from apex_core.hardware.specs import GpuSpec


DTYPE_BYTES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2": 1,
    "int8": 1,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype named as torch names it."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"no element size known for dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None


class Roofline(BaseModel):
    bytes_moved: int = Field(ge=0)
    flops: int = Field(ge=0)

    def floor_seconds(self, spec: GpuSpec, dtype: str) -> float:
        """The fastest this call can possibly run on ``spec``."""
        memory_time = self.bytes_moved / spec.peak_bandwidth_bytes_per_s
        compute_time = self.flops / spec.peak_flops(dtype)
        return max(memory_time, compute_time)

    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes_moved if self.bytes_moved else float("inf")
