"""The cpu-mini workload's patch points: its RMSNorm layers and its MLPs call the NumPy entry points
of its two tasks, cpu-mini__rms_norm and cpu-mini__silu_and_mul.

The target is transformers' Llama module, which the workload's loader imports; the adapter tells
cpu-mini to call the solution instead of the baseline. Verified on the CPU in CI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apex_core.patcher.points.point import PatchPoint
from apex_core.tasks.schema import Task


def _body(setter: str) -> Callable[[str], str]:
    def body(loader: str) -> str:
        return f'''    {loader.strip()}
    from apex_core.workloads import cpu_mini as _apex_cpu_mini
    _apex_cpu_mini.{setter}(solution)
'''
    return body


def _patched(function: Any) -> None:
    from apex_core.workloads import cpu_mini

    if not getattr(function, "__module__", "").startswith("apex_patch_"):
        raise LookupError(f"cpu-mini still calls {cpu_mini.label(function)}, not the patched solution")


def _rms_norm_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
    import torch

    from apex_core.workloads import cpu_mini

    _patched(cpu_mini.rms_norm_implementation())
    norm_class = cpu_mini.task_norm_class()

    def through_the_model(x: Any, weight: Any, eps: float) -> Any:
        norm = norm_class(x.shape[-1], eps=eps)
        with torch.no_grad():
            norm.weight.copy_(torch.from_numpy(weight))
            return norm(torch.from_numpy(x)).numpy()

    return through_the_model


def _silu_and_mul_path(module: Any, task: Task, device: str) -> Callable[..., Any]:
    """cpu-mini's TaskMLP with gate and up projections that pick the two halves of its input and an
    identity down projection: its output is exactly the activation of the input rows."""
    import torch
    from transformers import LlamaConfig

    from apex_core.workloads import cpu_mini

    _patched(cpu_mini.silu_and_mul_implementation())
    mlp_class = cpu_mini.task_mlp_class()

    def through_the_model(x: Any) -> Any:
        width = x.shape[-1] // 2
        mlp = mlp_class(LlamaConfig(hidden_size=2 * width, intermediate_size=width, hidden_act="silu", mlp_bias=False,
                                    num_attention_heads=1, num_key_value_heads=1))
        with torch.no_grad():
            identity = torch.eye(width, dtype=torch.float32)
            mlp.gate_proj.weight.zero_()[:, :width].copy_(identity)
            mlp.up_proj.weight.zero_()[:, width:].copy_(identity)
            mlp.down_proj = torch.nn.Identity()
            return mlp(torch.from_numpy(x)).numpy()

    return through_the_model


TARGET = "transformers.models.llama.modeling_llama"

POINTS = (
    PatchPoint(id="cpu-mini.rms_norm", stack="cpu-mini", kernels=("rms_norm",), models=("cpu-mini",), module=TARGET,
               description="cpu-mini's RMSNorm layers (TaskRMSNorm) call the solution instead of the task's NumPy baseline",
               body=_body("set_rms_norm"), model_path=_rms_norm_path),
    PatchPoint(id="cpu-mini.silu_and_mul", stack="cpu-mini", kernels=("silu_and_mul",), models=("cpu-mini",), module=TARGET,
               description="cpu-mini's MLPs (TaskMLP) call the solution on the gate/up rows instead of the task's NumPy baseline",
               body=_body("set_silu_and_mul"), model_path=_silu_and_mul_path),
)
