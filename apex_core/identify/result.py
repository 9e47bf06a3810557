"""The identifier's output: one hot kernel, what it is, where its source is, and what we can do."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from apex_core.identify.recorder import CallRecord, CallSite

Evidence = Literal["source", "module", "name", "none"]


class IdentifiedKernel(BaseModel):
    """One profiled kernel, ranked, classified and mapped to our tasks."""

    rank: int = Field(ge=1, description="1 = the most device time")
    name: str
    demangled: str | None = Field(default=None, description="the demangled name, where it differs")
    kind: str = Field(description="one of our kernel families, or 'other'")
    kind_evidence: Evidence = Field(description="what decided the kind: source index, module class, name")
    kernel_type: str = Field(description="triton, native, aten, cublas, cutlass, hipblaslt, rocblas, ck, asm, cudnn, miopen, other")
    device: str
    calls: int
    total_time_us: float
    device_time_share: float = Field(ge=0, le=1)
    module: str | None = Field(default=None, description="innermost nn.Module class it ran under")
    source: str | None = Field(default=None, description="path:line of the code a patch would replace")
    package: str | None = None
    package_version: str | None = None
    launchers: list[str] = Field(default_factory=list, description="functions that launch a Triton kernel")
    patchable: bool | None = Field(description="a patch can replace it; None: not known without the recording run (--no-shapes)")
    patchable_reason: str
    task_id: str | None = None
    task_ids: list[str] = Field(default_factory=list, description="every matching task, task_id first")
    call_site: CallSite | None = Field(default=None, description="where record_calls can see its arguments")
    shapes: list[CallRecord] = Field(default_factory=list)
    shapes_from: Literal["recorded", "profiler"] | None = None
