"""cpu-mini's RMSNorm layers: a distinct, replaceable call of the cpu-mini__rms_norm task's entry point.

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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

RmsNorm = Callable[..., Any]

_override: RmsNorm | None = None


def baseline_rms_norm() -> RmsNorm:
    """The cpu-mini__rms_norm task's baseline entry point."""
    from apex_core.kernels.rms_norm.baseline_python import rms_norm

    return rms_norm


def rms_norm_implementation() -> RmsNorm:
    """The function cpu-mini's norms call now: the override if one is set, else the task's baseline."""
    return _override if _override is not None else baseline_rms_norm()


def set_rms_norm(function: RmsNorm | None) -> None:
    """Make every cpu-mini norm call ``function`` (None: the task's baseline again)."""
    global _override
    _override = function


@contextlib.contextmanager
def use_rms_norm(function: RmsNorm) -> Iterator[None]:
    """Within this block, cpu-mini's norms call ``function``."""
    previous = _override
    set_rms_norm(function)
    try:
        yield
    finally:
        set_rms_norm(previous)


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


_CLASS: type | None = None


def task_norm_class() -> type:
    global _CLASS
    if _CLASS is None:
        _CLASS = _task_norm_class()
    return _CLASS


def install_task_norms(model: Any) -> int:
    """Replace each LlamaRMSNorm of ``model`` by a TaskRMSNorm with the same weight; the count replaced."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    cls = task_norm_class()
    replaced = 0
    for name, module in list(model.named_modules()):
        if isinstance(module, LlamaRMSNorm) and not isinstance(module, cls):
            norm = cls(module.weight.shape[0], eps=module.variance_epsilon)
            norm.weight = module.weight
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name) if parent_name else model, child, norm)
            replaced += 1
    return replaced
