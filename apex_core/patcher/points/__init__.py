"""Patch points: where each task's kernel lives in a stack we support, and the adapter that makes
the stack call a graded solution there, through the task's own contract.

A patch keeps the target module as it is and appends an adapter to it: the adapter loads the
solution from a copy placed beside the module (a Python file, or the shared library a HIP/CUDA/C++
solution was built into) and rebinds the one function or method the stack calls. The stack's
other code is untouched, and the same solution that ``apex grade`` graded runs unchanged inside
the model. Restoring the module removes the adapter and the copy.

Each stack's points live in one module beside this one (``cpu_mini``, ``llama``, ``qwen3_5``,
``gpt_oss``), each point with its adapter and its model path: how the in-model check calls the
patched module the way the model does. What was verified where is said in each module and in
docs/patching.md.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.tasks.schema import Task

ModelPath = Callable[[Any, Task, str], Callable[..., Any]]
"""(patched module, task, device) -> a function with the task's contract that runs the model's own
module; raises LookupError when the stack's call does not reach the patched solution."""

PYTHON_LOADER = '''
    import importlib.util as _apex_util
    import os as _apex_os
    _copy = _apex_os.path.join(_apex_os.path.dirname(__file__), {copy_name!r})
    _spec = _apex_util.spec_from_file_location({module_name!r}, _copy)
    _module = _apex_util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    solution = getattr(_module, {entry!r})
'''

LIBRARY_LOADER = '''
    import importlib.machinery as _apex_machinery
    import importlib.util as _apex_util
    import os as _apex_os
    import torch as _apex_torch  # the library links against libtorch, loaded first
    _copy = _apex_os.path.join(_apex_os.path.dirname(__file__), {copy_name!r})
    _loader = _apex_machinery.ExtensionFileLoader({module_name!r}, _copy)
    _spec = _apex_util.spec_from_loader({module_name!r}, _loader, origin=_copy)
    _module = _apex_util.module_from_spec(_spec)
    _loader.exec_module(_module)
    solution = getattr(_module, {entry!r})
'''
"""A built extension's init function is named after the module it was built as
(``PyInit_<module_name>``), so it is loaded under that name whatever its copy is called.

Both loaders find the copy beside the module's own file (``__file__``), not at the path it had
when patched: the same patched files work where they are mounted elsewhere (a container)."""


@dataclass(frozen=True)
class PatchPoint:
    """One place a task's kernel can be replaced in an installed stack."""

    id: str
    stack: str
    """cpu-mini, transformers, liger or fla: a workload run with ``--kernels liger`` calls Liger's
    modules, so its winners are patched at Liger's points."""
    kernels: tuple[str, ...]
    """Task kernel families (``task.kernel``) this point takes, Triton and native variants alike."""
    models: tuple[str, ...]
    """Task models (registry slugs) whose stack calls this point."""
    module: str
    """The target module's import name; its file is what the patch replaces."""
    description: str
    body: Callable[[str], str]
    """Loader code -> the adapter function's body (indented four spaces)."""
    model_path: ModelPath

    def target_file(self) -> Path | None:
        """The module's source file on this machine (found without importing it), or None."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin:
            return None
        if not spec.origin.endswith(".py"):
            raise ApexUserError(f"{self.id}: {self.module} is a compiled library ({Path(spec.origin).name}), one monolithic file "
                                "that cannot be replaced kernel by kernel; patch its Python call site instead")
        return Path(spec.origin).resolve()

    def adapter(self, patch_id: str, copy: Path, entry: str, task_id: str, library_module: str | None = None) -> str:
        """The code appended to the target module: load the solution copy, rebind the call.
        ``library_module``: the copy is a built extension of that module name."""
        name = patch_id.replace("-", "_")
        if library_module is None:
            loader = PYTHON_LOADER.format(module_name=f"apex_patch_{name}", copy_name=copy.name, entry=entry)
        else:
            loader = LIBRARY_LOADER.format(module_name=library_module, copy_name=copy.name, entry=entry)
        return (f"\n\n# --- apex patch {patch_id}: {task_id} (apex patch restore removes this) ---\n"
                f"def _apex_patch_{name}():\n{self.body(loader)}\n\n_apex_patch_{name}()\n")


def _all_points() -> tuple[PatchPoint, ...]:
    from apex_core.patcher.points import cpu_mini, gpt_oss, llama, qwen3_5

    return (*cpu_mini.POINTS, *llama.POINTS, *qwen3_5.POINTS, *gpt_oss.POINTS)


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
