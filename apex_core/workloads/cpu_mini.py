"""cpu-mini's RMSNorm and MLP layers: distinct, replaceable calls of the entry points of its two
tasks, cpu-mini__rms_norm and cpu-mini__silu_and_mul.

Every ``LlamaRMSNorm`` of the cpu-mini model is replaced by ``TaskRMSNorm`` (a subclass, so code
that looks for Llama norms still finds them), whose forward flattens the activations to float32
rows ``(tokens, 1024)`` and calls ``rms_norm(x, weight, eps)`` with the task's exact contract:
C-contiguous float32 NumPy arrays in, a new float32 array out. The function called is the task's
baseline (``apex_core/kernels/rms_norm/baseline_python.py``: plain Python loops) unless replaced:

    with use_rms_norm(solution.rms_norm):   # or set_rms_norm(fn) / set_rms_norm(None)
        loaded.step()

Each call runs inside ``torch.profiler.record_function(label)``, the label being the function's
``module.qualname`` (``apex_core.kernels.rms_norm.baseline_python.rms_norm`` by default), so a CPU
profile names it and attributes its time. Prefill calls it with ``batch * prompt_tokens`` rows,
each decode step with ``batch`` rows: shapes the task covers (rows × hidden, any rows).

Every ``LlamaMLP`` is likewise replaced by ``TaskMLP``, whose forward computes the gate and up
projections, lays them side by side as float32 rows ``(tokens, 2 × 256)`` and calls
``silu_and_mul(x)`` (``apex_core/kernels/silu_and_mul/baseline_python.py`` unless replaced,
``set_silu_and_mul``) before the down projection: a second kernel, so that a CPU run has two
winners whose end-to-end credit the final benchmark can tell apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

RmsNorm = Callable[..., Any]
SiluAndMul = Callable[..., Any]


class _EntryPoint:
    """One task's entry point as cpu-mini's layers call it: the task's baseline, unless a patch (or
    a test) set another function."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        self.override: Callable[..., Any] | None = None

    def baseline(self) -> Callable[..., Any]:
        import importlib

        return getattr(importlib.import_module(self.module), self.name)

    def current(self) -> Callable[..., Any]:
        return self.override if self.override is not None else self.baseline()


_NORM = _EntryPoint("apex_core.kernels.rms_norm.baseline_python", "rms_norm")
_ACTIVATION = _EntryPoint("apex_core.kernels.silu_and_mul.baseline_python", "silu_and_mul")


def baseline_rms_norm() -> RmsNorm:
    """The cpu-mini__rms_norm task's baseline entry point."""
    return _NORM.baseline()


def rms_norm_implementation() -> RmsNorm:
    """The function cpu-mini's norms call now: the override if one is set, else the task's baseline."""
    return _NORM.current()


def set_rms_norm(function: RmsNorm | None) -> None:
    """Make every cpu-mini norm call ``function`` (None: the task's baseline again)."""
    _NORM.override = function


@contextlib.contextmanager
def use_rms_norm(function: RmsNorm) -> Iterator[None]:
    """Within this block, cpu-mini's norms call ``function``."""
    previous = _NORM.override
    set_rms_norm(function)
    try:
        yield
    finally:
        set_rms_norm(previous)


def baseline_silu_and_mul() -> SiluAndMul:
    """The cpu-mini__silu_and_mul task's baseline entry point."""
    return _ACTIVATION.baseline()


def silu_and_mul_implementation() -> SiluAndMul:
    """The function cpu-mini's MLPs call now: the override if one is set, else the task's baseline."""
    return _ACTIVATION.current()


def set_silu_and_mul(function: SiluAndMul | None) -> None:
    """Make every cpu-mini MLP call ``function`` (None: the task's baseline again)."""
    _ACTIVATION.override = function


def label(function: RmsNorm) -> str:
    return f"{getattr(function, '__module__', None) or 'unknown'}.{getattr(function, '__qualname__', 'rms_norm')}"


def _task_norm_class() -> type:
    import numpy as np
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    class TaskRMSNorm(LlamaRMSNorm):
        """LlamaRMSNorm whose forward calls the cpu-mini__rms_norm entry point on float32 rows."""

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            function = rms_norm_implementation()
            shape = hidden_states.shape
            rows = hidden_states.detach().reshape(-1, shape[-1]).to(torch.float32).contiguous().numpy()
            weight = self.weight.detach().to(torch.float32).contiguous().numpy()
            with torch.profiler.record_function(label(function)):
                out = function(rows, weight, float(self.variance_epsilon))
            out = np.ascontiguousarray(out, dtype=np.float32)
            return torch.from_numpy(out).reshape(shape).to(hidden_states.dtype)

    return TaskRMSNorm


def _task_mlp_class() -> type:
    import numpy as np
    import torch
    from transformers.models.llama.modeling_llama import LlamaMLP

    class TaskMLP(LlamaMLP):
        """LlamaMLP whose activation is the cpu-mini__silu_and_mul entry point on float32 rows."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            function = silu_and_mul_implementation()
            shape = x.shape
            rows = x.detach().reshape(-1, shape[-1])
            gate_up = torch.cat((self.gate_proj(rows), self.up_proj(rows)), dim=-1).to(torch.float32).contiguous().numpy()
            with torch.profiler.record_function(label(function)):
                out = function(gate_up)
            out = torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).to(x.dtype)
            return self.down_proj(out).reshape(*shape[:-1], -1)

    return TaskMLP


_CLASSES: dict[str, type] = {}


def task_norm_class() -> type:
    if "norm" not in _CLASSES:
        _CLASSES["norm"] = _task_norm_class()
    return _CLASSES["norm"]


def task_mlp_class() -> type:
    if "mlp" not in _CLASSES:
        _CLASSES["mlp"] = _task_mlp_class()
    return _CLASSES["mlp"]


def install_task_layers(model: Any) -> int:
    """Replace each LlamaRMSNorm of ``model`` by a TaskRMSNorm with the same weight, and each
    LlamaMLP by a TaskMLP with the same projections; the count replaced."""
    from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

    norm_class, mlp_class = task_norm_class(), task_mlp_class()
    replaced = 0
    for name, module in list(model.named_modules()):
        if isinstance(module, LlamaRMSNorm) and not isinstance(module, norm_class):
            layer = norm_class(module.weight.shape[0], eps=module.variance_epsilon)
            layer.weight = module.weight
        elif isinstance(module, LlamaMLP) and not isinstance(module, mlp_class):
            layer = mlp_class(module.config)
            layer.gate_proj, layer.up_proj, layer.down_proj = module.gate_proj, module.up_proj, module.down_proj
        else:
            continue
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer)
        replaced += 1
    return replaced
