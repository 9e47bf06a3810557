"""Patch points: where each task's kernel lives in a stack we support, and the adapter that makes
the stack call a graded solution there, through the task's own contract.

A patch keeps the target module as it is and appends an adapter to it: the adapter loads the
solution from a copy placed beside the module (a Python file, or the shared library a HIP/CUDA/C++
solution was built into) and rebinds the one function or method the stack calls. The stack's
other code is untouched, and the same solution that ``apex grade`` graded runs unchanged inside
the model. Restoring the module removes the adapter and the copy.

Each stack's points live in one module beside this one (``cpu_mini``, ``llama``, ``qwen3_5``,
``gpt_oss``, ``gemma2``), each point with its adapter and its model path: how the in-model check calls the
patched module the way the model does. What was verified where is said in each module and in
docs/patching.md.
"""

from __future__ import annotations

from apex_core.errors import ApexUserError
from apex_core.patcher.points.point import LIBRARY_LOADER, PYTHON_LOADER, ModelPath, PatchPoint
from apex_core.tasks.schema import Task

__all__ = ["LIBRARY_LOADER", "POINTS", "PYTHON_LOADER", "ModelPath", "PatchPoint", "get_point", "point_for"]


def _all_points() -> tuple[PatchPoint, ...]:
    from apex_core.patcher.points import cpu_mini, gemma2, gpt_oss, llama, qwen3_5

    return (*cpu_mini.POINTS, *llama.POINTS, *qwen3_5.POINTS, *gpt_oss.POINTS, *gemma2.POINTS)


POINTS: tuple[PatchPoint, ...] = _all_points()


def get_point(point_id: str) -> PatchPoint:
    for point in POINTS:
        if point.id == point_id:
            return point
    raise ApexUserError(f"--point {point_id}: no such patch point; the points are {', '.join(p.id for p in POINTS)}")


def point_for(task: Task, point_id: str | None = None, kernel_stacks: tuple[str, ...] = ()) -> PatchPoint:
    """The patch point of ``task`` on this machine, or a one-line error saying why there is none.

    ``point_id``: that one. Otherwise the first installed one, a point of ``kernel_stacks`` (the
    workload's ``--kernels``, whose modules the model then calls) before transformers' own."""
    candidates = [p for p in POINTS if task.kernel in p.kernels and _model_slug(task) in p.models]
    if not candidates:
        known = ", ".join(sorted({f"{m}__{k}" for p in POINTS for m in p.models for k in p.kernels}))
        raise ApexUserError(f"{task.id}: no patch point yet for this kernel in the stacks we support (tasks with one: {known})")
    if point_id is not None:
        chosen = [p for p in candidates if p.id == point_id]
        if not chosen:
            raise ApexUserError(f"--point {point_id}: not a patch point of {task.id}; its points are "
                                f"{', '.join(p.id for p in candidates)}")
        candidates = chosen
    elif kernel_stacks:
        preferred = [p for p in candidates if p.stack in kernel_stacks]
        candidates = preferred + [p for p in candidates if p not in preferred]
    for point in candidates:
        if point.target_file() is not None:
            return point
    raise ApexUserError(f"{task.id}: its stack is not installed here ({candidates[0].module} was not found)")


def _model_slug(task: Task) -> str:
    return task.id.split("__", 1)[0]
