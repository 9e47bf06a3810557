"""Patch points: where each task's kernel lives in a stack we support, and the adapter that makes
the stack call a graded solution there, through the task's own contract.

A patch keeps the target module as it is and appends an adapter to it: the adapter loads the
solution from a copy placed beside the module and rebinds the one function or method the stack
calls. The stack's other code is untouched, and the same solution file that ``apex grade``
graded runs unchanged inside the model. Restoring the module removes the adapter and the copy.

Verified: the cpu-mini point (CPU, in CI); the transformers Llama point, written against
transformers 5.x's ``LlamaRMSNorm`` (forward(hidden_states), ``weight``, ``variance_epsilon``), and
the Liger point, against liger-kernel 0.8.5's ``LigerRMSNorm``, on an H200 with transformers 5.17
(docs/patching.md). Points for Liger's rope and swiglu, fla, vLLM, SGLang and aiter come next.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apex_core.errors import ApexUserError
from apex_core.tasks.schema import Task

LOADER = '''
    import importlib.util as _apex_util
    _spec = _apex_util.spec_from_file_location({module_name!r}, {copy!r})
    _module = _apex_util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    solution = getattr(_module, {entry!r})
'''


def _cpu_mini_rms_norm(loader: str) -> str:
    return f'''    {loader.strip()}
    from apex_core.workloads import cpu_mini as _apex_cpu_mini
    _apex_cpu_mini.set_rms_norm(solution)
'''


def _transformers_llama_rms_norm(loader: str) -> str:
    return f'''    {loader.strip()}

    def forward(self, hidden_states):
        shape = hidden_states.shape
        rows = hidden_states.reshape(-1, shape[-1]).contiguous()
        return solution(rows, self.weight, self.variance_epsilon).reshape(shape)

    forward.__apex_solution__ = solution
    LlamaRMSNorm.forward = forward
'''


def _liger_llama_rms_norm(loader: str) -> str:
    return f'''    {loader.strip()}
    original = LigerRMSNorm.forward

    def forward(self, hidden_states):
        if self.offset != 0.0 or self.casting_mode != "llama" or self.weight is None:
            return original(self, hidden_states)  # another model's norm (Gemma's offset): not this task's contract
        shape = hidden_states.shape
        rows = hidden_states.reshape(-1, shape[-1]).contiguous()
        return solution(rows, self.weight, self.variance_epsilon).reshape(shape)

    forward.__apex_solution__ = solution
    LigerRMSNorm.forward = forward
'''


class PatchPoint(BaseModel):
    """One place a task's kernel can be replaced in an installed stack."""

    model_config = ConfigDict(frozen=True)

    id: str
    kernel: str
    """The task's kernel family (``task.kernel``)."""
    models: tuple[str, ...]
    """Task models (registry slugs) whose stack calls this point."""
    module: str
    """The target module's import name; its file is what the patch replaces."""
    description: str

    def target_file(self) -> Path | None:
        """The module's source file on this machine (found without importing it), or None."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        return Path(spec.origin).resolve()

    def adapter(self, patch_id: str, copy: Path, entry: str, task_id: str) -> str:
        """The code appended to the target module: load the solution copy, rebind the call."""
        name = patch_id.replace("-", "_")
        loader = LOADER.format(module_name=f"apex_patch_{name}", copy=str(copy), entry=entry)
        body = ADAPTERS[self.id](loader)
        return (f"\n\n# --- apex patch {patch_id}: {task_id} (apex patch restore removes this) ---\n"
                f"def _apex_patch_{name}():\n{body}\n\n_apex_patch_{name}()\n")


ADAPTERS: dict[str, Callable[[str], str]] = {
    "cpu-mini.rms_norm": _cpu_mini_rms_norm,
    "transformers.llama.rms_norm": _transformers_llama_rms_norm,
    "liger.llama.rms_norm": _liger_llama_rms_norm,
}

POINTS: tuple[PatchPoint, ...] = (
    PatchPoint(id="cpu-mini.rms_norm", kernel="rms_norm", models=("cpu-mini",), module="transformers.models.llama.modeling_llama",
               description="cpu-mini's RMSNorm layers (TaskRMSNorm) call the solution instead of the task's NumPy baseline"),
    PatchPoint(id="transformers.llama.rms_norm", kernel="rms_norm", models=("llama-3-1-8b-instruct",),
               module="transformers.models.llama.modeling_llama",
               description="transformers' LlamaRMSNorm.forward calls the solution on (tokens, hidden) rows"),
    PatchPoint(id="liger.llama.rms_norm", kernel="rms_norm", models=("llama-3-1-8b-instruct",),
               module="liger_kernel.transformers.rms_norm",
               description="Liger's LigerRMSNorm.forward (what --kernels liger puts in Llama) calls the solution on rows"),
)


def point_for(task: Task, point_id: str | None = None) -> PatchPoint:
    """The patch point of ``task`` on this machine (``point_id``: that one; default: the first whose
    module is installed, transformers' before a kernel stack's), or a one-line error saying why
    there is none. A workload run with ``--kernels liger`` calls Liger's modules: patch those."""
    candidates = [p for p in POINTS if p.kernel == task.kernel and _model_slug(task) in p.models]
    if not candidates:
        known = ", ".join(sorted({f"{m}__{p.kernel}" for p in POINTS for m in p.models}))
        raise ApexUserError(f"{task.id}: no patch point yet for this kernel in the stacks we support (tasks with one: {known})")
    if point_id is not None:
        chosen = [p for p in candidates if p.id == point_id]
        if not chosen:
            raise ApexUserError(f"--point {point_id}: not a patch point of {task.id}; its points are "
                                f"{', '.join(p.id for p in candidates)}")
        candidates = chosen
    for point in candidates:
        if point.target_file() is not None:
            return point
    raise ApexUserError(f"{task.id}: its stack is not installed here ({candidates[0].module} was not found)")


def _model_slug(task: Task) -> str:
    return task.id.split("__", 1)[0]
