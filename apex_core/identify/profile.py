"""The identifier's input: one row of a profiler's kernel table.

Defined here, not imported from the profiler, so that the identifier depends only on the fields it
reads: anything with these attributes (the profiler's ``KernelRecord``, a dict read from
``results/<run>/profile.json``, a row parsed from rocprofv3 or Nsight) can be identified.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apex_core.errors import ApexUserError


class ProfiledKernel(BaseModel):
    """A kernel (or, on the CPU, an operator) and the time it took over a profiled run."""

    model_config = ConfigDict(from_attributes=True, extra="ignore")

    name: str = Field(min_length=1)
    mangled_name: str | None = None
    device: str = "cuda"
    calls: int = Field(default=1, ge=0)
    total_time_us: float = Field(ge=0)
    share: float | None = Field(default=None, ge=0, le=1)
    module: str | None = Field(default=None, description="innermost nn.Module class the kernel ran under")
    launch_op: str | None = Field(default=None, description="for a GPU kernel, the PyTorch op that launched it (aten::mul)")
    input_shapes: list[Any] = Field(default_factory=list)


def read_profile(rows: Iterable[Any]) -> list[ProfiledKernel]:
    """Rows as ``ProfiledKernel``s; a malformed row is a one-line error naming its index and field."""
    kernels: list[ProfiledKernel] = []
    for index, row in enumerate(rows):
        try:
            kernels.append(ProfiledKernel.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(row)"
            raise ApexUserError(f"profile row {index}: {field}: {first['msg']}") from None
    if not kernels:
        raise ApexUserError("the profile has no kernels: profile a workload first (apex profile --workload ID)")
    return kernels
