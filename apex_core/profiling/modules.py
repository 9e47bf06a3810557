"""Attributing ops to the torch.nn.Module that ran them, by naming a profiler range per module call.

torch.profiler's own ``with_modules=True`` only records the module hierarchy of TorchScript
modules: with eager modules (torch 2.x, tried here on the CPU) no event carries it. Its
``with_stack=True`` does add ``nn.Module: Name_0`` ranges through the Python tracer, at the cost
of tracing every Python call. So instead, while a capture records, global forward hooks open a
``record_function`` range ``nn.Module: <class>`` around each module call (the same naming the
Python tracer uses, so Perfetto shows both alike). Every op, and every GPU kernel through the op
that launched it, then has its innermost module among its parent ranges.

The hooks see calls made through ``module(...)``; a ``forward`` called directly, or a module
inside a compiled graph, is not attributed (its ops count under the enclosing module).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from apex_core.profiling.records import Shape
from apex_core.profiling.table import add_shapes

MODULE_RANGE_PREFIX = "nn.Module: "


def module_of_range(name: str) -> str | None:
    """The module class a range names, or None for any other event."""
    return name[len(MODULE_RANGE_PREFIX):] if name.startswith(MODULE_RANGE_PREFIX) else None


class ModuleRanges:
    """The hooks' state: each thread's open ranges, and the input shapes each module class saw."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.input_shapes: dict[str, list[list[Shape]]] = defaultdict(list)

    def _stack(self) -> list[Any]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def enter(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        name = type(module).__name__
        shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
        if shapes:  # modules called with keyword tensors only (global hooks see no kwargs) record none
            add_shapes(self.input_shapes[name], shapes)
        scope = torch.profiler.record_function(MODULE_RANGE_PREFIX + name)
        scope.__enter__()
        self._stack().append(scope)

    def exit(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        stack = self._stack()
        if stack:
            stack.pop().__exit__(None, None, None)


@contextmanager
def module_ranges() -> Iterator[ModuleRanges]:
    """Open a profiler range around every module call inside the ``with`` block."""
    ranges = ModuleRanges()
    register = torch.nn.modules.module
    pre = register.register_module_forward_pre_hook(lambda module, args: ranges.enter(module, args))
    # always_call: the range closes even when forward raises, so ranges never nest wrongly.
    post = register.register_module_forward_hook(
        lambda module, args, output: ranges.exit(module, args, output), always_call=True
    )
    try:
        yield ranges
    finally:
        pre.remove()
        post.remove()
