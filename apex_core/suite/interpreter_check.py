"""Correctness of a task's Triton code at small shapes, run where no GPU is needed.

CI has no GPU, so every Triton baseline and reference solution is checked under Triton's CPU
interpreter (``TRITON_INTERPRET=1``, set by the caller before Triton is imported) at the task's
``cpu_shapes``. This runs the code in-process: use it only on code we ship (baselines, our
reference solutions), never on an agent's solution, which goes through the sandboxed grader.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apex_core.grader import check_call
from apex_core.kernels import interpreter_fixes
from apex_core.tasks.schema import Shape, Task


class ShapeVerdict(BaseModel):
    shape: Shape
    passed: bool
    max_abs_error: float | None = None
    message: str = ""


def load_entry_point(task: Task, source: Path) -> Any:
    """Import a trusted source file and return its entry point."""
    interpreter_fixes.apply()
    name = f"apex_checked_{abs(hash(str(source)))}"
    spec = importlib.util.spec_from_file_location(name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, task.entry_point)


def check_source(task: Task, source: Path, shapes: list[Shape] | None = None, seed: int = 1) -> list[ShapeVerdict]:
    """Check ``source`` at ``shapes`` (default: the task's cpu_shapes) on the CPU."""
    function = load_entry_point(task, source)
    verdicts = []
    for index, shape in enumerate(shapes if shapes is not None else task.cpu_shapes):
        for strided in (False, True) if task.strided_args else (False,):
            comparison = check_call(task, function, shape, seed + index, strided=strided)
            message = f"row-strided inputs: {comparison.message}" if strided and comparison.message else comparison.message
            verdicts.append(
                ShapeVerdict(shape=shape, passed=comparison.passed, max_abs_error=comparison.max_abs_error, message=message)
            )
    return verdicts
