"""The profiler's results at the boundary: one row per kernel, and one profile around them.

Every source of kernel timings (torch.profiler here, rocprofv3 and the Nsight tools through their
readers) ends in the same ``KernelRecord`` list, so the identifier ranks and classifies kernels
without knowing which tool measured them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

Shape = list[int]

#: Version of the ``profile.json`` layout; the loader refuses other versions with a clear error.
SCHEMA_VERSION = 1


class KernelRecord(BaseModel):
    """One kernel (GPU) or one group of CPU ops, summed over the profiled calls.

    On a GPU a row is one device kernel, by name. On the CPU there are no kernels: a row is the
    CPU ops that ran inside one module class (``nn.Module: LlamaRMSNorm``, with its ops in
    ``ops``), or one op that ran outside any module. ``device`` is ``"cuda"`` for any GPU,
    ROCm included, as torch names it.
    """

    name: str = Field(description="the kernel or group name as the profiler reports it (demangled when it was mangled)")
    mangled_name: str | None = Field(default=None, description="the mangled symbol, where it differs from name")
    device: Literal["cuda", "cpu"]
    calls: int = Field(ge=0)
    total_time_us: float = Field(ge=0)
    mean_time_us: float = Field(ge=0)
    share: float = Field(ge=0, le=1, description="of total device time on a GPU, of total CPU op self time on the CPU")
    module: str | None = Field(default=None, description="class of the innermost torch.nn.Module that ran it, when known")
    input_shapes: list[list[Shape]] = Field(default_factory=list, description="a few distinct input shape lists seen")
    launch_op: str | None = Field(default=None, description="for a GPU kernel, the CPU op that launched it, where linked")
    ops: list[str] = Field(default_factory=list, description="for a CPU module row, its ops by self time, largest first")


class ProfileResult(BaseModel):
    """What one capture measured: the kernel table, the times around it, and where the trace is."""

    schema_version: int = SCHEMA_VERSION
    source: str = Field(description="the tool that measured it: torch.profiler, rocprofv3, nsys, ncu")
    device: Literal["cuda", "cpu"]
    device_name: str = Field(description="the GPU's name, or the CPU's")
    kernels: list[KernelRecord]
    total_time_us: float = Field(ge=0, description="total device time on a GPU, total CPU op self time on the CPU")
    warmup_calls: int = Field(ge=0)
    profiled_calls: int = Field(ge=1)
    profiled_wall_s: float | None = Field(default=None, ge=0, description="wall time of the profiled calls")
    unprofiled_wall_s: float | None = Field(default=None, ge=0, description="wall time of as many calls, unprofiled")
    trace_path: str | None = Field(default=None, description="the Chrome trace (opens in Perfetto)")
    torch_version: str | None = None
    notes: list[str] = Field(default_factory=list, description="anything a reader of the table should know")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def overhead(self) -> float | None:
        """How much slower the profiled calls ran than unprofiled ones (0.25 = 25% slower)."""
        if not self.profiled_wall_s or not self.unprofiled_wall_s:
            return None
        return self.profiled_wall_s / self.unprofiled_wall_s - 1.0

    def top(self, k: int) -> list[KernelRecord]:
        """The ``k`` rows with the most time (the table is kept sorted that way)."""
        return self.kernels[:k]
