"""The cpu-mini workload's patch point: its RMSNorm layers call the task's NumPy entry point.

The target is transformers' Llama module, which the workload's loader imports; the adapter tells
cpu-mini to call the solution instead of the baseline. Verified on the CPU in CI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apex_core.patcher.points import PatchPoint
from apex_core.tasks.schema import Task


def _body(loader: str) -> str:
    return f'''    {loader.strip()}
    from apex_core.workloads import cpu_mini as _apex_cpu_mini
    _apex_cpu_mini.set_rms_norm(solution)
'''


def _model_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
    import torch

    from apex_core.workloads import cpu_mini

    function = cpu_mini.rms_norm_implementation()
    if not getattr(function, "__module__", "").startswith("apex_patch_"):
        raise LookupError(f"cpu-mini's norms still call {cpu_mini.label(function)}, not the patched solution")
    norm_class = cpu_mini.task_norm_class()

    def through_the_model(x: Any, weight: Any, eps: float) -> Any:
        norm = norm_class(x.shape[-1], eps=eps)
        with torch.no_grad():
            norm.weight.copy_(torch.from_numpy(weight))
            return norm(torch.from_numpy(x)).numpy()

    return through_the_model


POINTS = (
    PatchPoint(id="cpu-mini.rms_norm", stack="cpu-mini", kernels=("rms_norm",), models=("cpu-mini",),
               module="transformers.models.llama.modeling_llama",
               description="cpu-mini's RMSNorm layers (TaskRMSNorm) call the solution instead of the task's NumPy baseline",
               body=_body, model_path=_model_path),
)
