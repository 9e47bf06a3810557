"""Shared fixtures of the pipeline's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.grader import GradeResult, Outcome, ShapeCheck, result_without_solution
from apex_core.tasks import get_task


@pytest.fixture
def verdict():
    """Results of the CPU task with a chosen outcome, reason, checks and flags, made by the grader's
    own constructor, so reflection and the knowledge base see the exact type a grading returns."""
    def make(outcome: Outcome, reason: str = "", checks: list[ShapeCheck] | None = None,
             flags: list[str] | None = None, **fields: object) -> GradeResult:
        base = result_without_solution(get_task("cpu-mini__rms_norm"), Path("output/cpu-mini__rms_norm/solution.py"), "")
        return base.model_copy(update={"outcome": outcome, "reason": reason, "checks": checks or [], "flags": flags or [],
                                       **fields})

    return make
