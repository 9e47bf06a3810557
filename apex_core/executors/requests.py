"""What goes into an executor and what comes out: the typed boundary of the grading executors.

A solution travels by content (its file name and bytes), never by path: the nodes of a Ray cluster
do not share a disk, and a file that changes after it was submitted must not change the verdict.
Every request has a grading id; an executor grades each id at most once and answers it once,
however many times it is submitted or retried (``base.Executor``).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apex_core.grader import GradeOptions, GradeResult

ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "ray")
MAX_SOLUTION_BYTES = 4 << 20
"""The largest solution file accepted (4 MiB): solutions are source files; megabytes of them are a mistake."""


class SolutionContent(BaseModel):
    """A solution file as bytes and a bare file name (its ending says what kind of source it is)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=255, description="a bare file name, e.g. solution.py")
    content: bytes = Field(max_length=MAX_SOLUTION_BYTES)

    @field_validator("name")
    @classmethod
    def _bare_name(cls, name: str) -> str:
        if "/" in name or "\\" in name or "\0" in name or name in (".", "..") or name.startswith("."):
            raise ValueError(f"solution name {name!r} must be a bare file name such as solution.py (no folders, not hidden)")
        return name

    @classmethod
    def from_path(cls, path: Path) -> SolutionContent:
        return cls(name=path.name, content=path.read_bytes())

    @property
    def sha256(self) -> str:
        """The same hash the judge gives the file (``solution_file.file_hash``): the cache keys agree."""
        return hashlib.sha256(self.content).hexdigest()


class GradingRequest(BaseModel):
    """One solution of one task to grade, and where it may be graded."""

    task_id: str
    solution: SolutionContent
    options: GradeOptions = Field(default_factory=GradeOptions)
    target: str | None = Field(default=None, description=(
        "GPU arch or product (gfx950, sm_90, mi355x, h200) a GPU task must be graded on; None: any GPU, else the CPU. "
        "CPU tasks run on any node's CPU."))
    use_cache: bool = True
    grading_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=128)
    label: str | None = Field(default=None, description="shown as the result's solution_path (default: the file name)")

    @classmethod
    def for_file(cls, task_id: str, path: Path, **fields: object) -> GradingRequest:
        """A request for the file at ``path`` as it is now; its path is the result's label."""
        return cls(task_id=task_id, solution=SolutionContent.from_path(path), label=str(path), **fields)


class Placement(BaseModel):
    """Where a grading ran: the node and actor (or this machine), and how many attempts it took."""

    executor: ExecutorName
    node: str = Field(description="Ray node id, or 'local'; 'cache' when the verdict came from the driver's cache")
    host: str
    actor: str = Field(description="the grading actor's name, or the device of the local executor")
    attempts: int = Field(ge=0, description="actor runs it took (0: answered from the driver's cache)")


class GradedSolution(BaseModel):
    """The answer to one request: the grader's result and where it was graded."""

    grading_id: str
    task_id: str
    result: GradeResult
    placement: Placement
