"""Grading executors: where gradings run. ``local`` grades on this machine's GPUs (what ``apex
grade`` has always done); ``ray`` spreads them over a Ray cluster, one grading actor per GPU.

Both take ``GradingRequest``s (a task id and a solution's bytes) and answer ``GradedSolution``s;
``make_executor`` picks one by name. Ray is imported only when the ray executor starts. The design:
docs/ray.md.
"""

from __future__ import annotations

from apex_core.errors import ApexUserError
from apex_core.executors.base import Executor, ExecutorStats, grade_files
from apex_core.executors.requests import EXECUTORS, GradedSolution, GradingRequest, Placement, SolutionContent

__all__ = ["EXECUTORS", "Executor", "ExecutorStats", "GradedSolution", "GradingRequest", "Placement", "SolutionContent",
           "grade_files", "make_executor"]


def make_executor(name: str, ray_address: str | None = None, **settings: object) -> Executor:
    """The executor called ``name`` (local or ray); ``ray_address`` only with ray."""
    if name == "local":
        if ray_address:
            raise ApexUserError("--ray-address is for --executor ray; add --executor ray or leave the address out")
        from apex_core.executors.local import LocalExecutor

        return LocalExecutor(**settings)  # type: ignore[arg-type]
    if name == "ray":
        from apex_core.executors.ray_executor import RayExecutor

        return RayExecutor(ray_address, **settings)  # type: ignore[arg-type]
    raise ApexUserError(f"unknown executor {name!r}; use {' or '.join(EXECUTORS)}")
