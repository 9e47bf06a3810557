"""A patch point: where one task's kernel lives in an installed stack, and the adapter appended to
that stack's module to call a graded solution there (the loaders of a Python copy and of a built
library). The stacks' points are declared in the modules beside this one; the registry of them all
is the package's ``__init__``."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import MODELS
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


def models_of_family(family: str) -> tuple[str, ...]:
    """The slugs of the registry's models of one architecture family: the models whose tasks a
    family's patch points serve, since they share transformers' modeling module."""
    return tuple(slug for slug, model in MODELS.items() if model.family == family)
