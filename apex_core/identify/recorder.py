"""Recording the shapes a model really passes at its patchable call sites.

A task's shapes should come from the workload, not from a guess. ``record_calls`` is a context
manager over a live model: while it is open, the forwards of chosen module classes and chosen
functions (a Triton kernel object or a plain Python function, named ``package.module:attribute``)
are wrapped so that their first few calls log each argument's shape, dtype and strides (scalars
by value). Everything wrapped is put back on exit, also after an exception. The same pass notes
where each module class's ``forward`` is defined, which is the source a module-level patch edits.

Limits (docs/identify.md): a function is wrapped where its module defines it, so a caller that
did ``from x import f`` before recording keeps the unwrapped ``f``; a Triton kernel is wrapped on
its kernel object (its ``run``), which every caller shares, so all its launches are seen.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError

DEFAULT_MAX_CALLS = 3
VALUE_TEXT_LIMIT = 80


class TensorSpec(BaseModel):
    shape: list[int]
    dtype: str | None = None
    stride: list[int] | None = None
    device: str | None = None


class ArgSpec(BaseModel):
    """One argument of one call: a tensor's layout, or a scalar's value as text."""

    name: str
    tensor: TensorSpec | None = None
    value: str | None = None


class CallRecord(BaseModel):
    args: list[ArgSpec]


class CallSite(BaseModel):
    """A place to record: a module class's forward, or ``package.module:attribute``."""

    kind: Literal["module", "function"]
    target: str

    @property
    def key(self) -> str:
        return self.target


class ModuleSource(BaseModel):
    """Where a module class's forward is written."""

    path: str
    line: int
    python_module: str


class ShapeRecording(BaseModel):
    """What one recording saw: calls per site key, and the source of each module class."""

    calls: dict[str, list[CallRecord]] = Field(default_factory=dict)
    module_sources: dict[str, ModuleSource] = Field(default_factory=dict)


def describe(value: Any, name: str) -> ArgSpec:
    """An argument as an ArgSpec; anything with shape/dtype/stride counts as a tensor."""
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        stride = value.stride() if callable(getattr(value, "stride", None)) else getattr(value, "strides", None)
        device = getattr(value, "device", None)
        return ArgSpec(
            name=name,
            tensor=TensorSpec(
                shape=[int(d) for d in shape],
                dtype=str(value.dtype).removeprefix("torch."),
                stride=[int(s) for s in stride] if stride is not None else None,
                device=str(device) if device is not None else None,
            ),
        )
    text = repr(value) if isinstance(value, (bool, int, float, str, type(None))) else type(value).__name__
    return ArgSpec(name=name, value=text[:VALUE_TEXT_LIMIT])


def _describe_call(names: list[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallRecord:
    described = [describe(value, names[i] if i < len(names) else f"arg{i}") for i, value in enumerate(args)]
    described += [describe(value, key) for key, value in kwargs.items() if key not in ("grid", "warmup")]
    return CallRecord(args=described)


def _parameter_names(function: Any) -> list[str]:
    names = getattr(function, "arg_names", None)  # Triton's JITFunction and Autotuner keep them
    if names:
        return list(names)
    try:
        return [p for p in inspect.signature(function).parameters if p != "self"]
    except (TypeError, ValueError):
        return []


def _module_source(cls: type) -> ModuleSource | None:
    forward = getattr(cls, "forward", None)
    try:
        path = inspect.getsourcefile(forward) if forward is not None else None
        line = inspect.getsourcelines(forward)[1] if path else 0
    except (OSError, TypeError):
        return None
    if not path:
        return None
    return ModuleSource(path=path, line=line, python_module=getattr(cls, "__module__", ""))


def _is_torch_own(cls: type) -> bool:
    return getattr(cls, "__module__", "").split(".")[0] == "torch"


def _resolve(target: str) -> tuple[Any, str]:
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ApexUserError(f"call site {target!r}: write it as 'package.module:attribute'")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ApexUserError(f"call site {target!r}: cannot import {module_name}: {exc}") from None
    *parents, last = attribute.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if not hasattr(owner, last):
        raise ApexUserError(f"call site {target!r}: {module_name} has no attribute {attribute!r}")
    return owner, last


@contextmanager
def record_calls(model: Any, sites: Iterable[CallSite] | None = None, max_calls: int = DEFAULT_MAX_CALLS) -> Iterator[ShapeRecording]:
    """Record the first ``max_calls`` calls of each site while the block runs the model.

    ``sites`` None records every module class of ``model`` that is not PyTorch's own (torch.nn
    layers are library calls, not patch targets). The recording fills in as the model runs.
    """
    if max_calls < 1:
        raise ApexUserError(f"max_calls must be at least 1, not {max_calls}")
    recording = ShapeRecording()
    modules = list(model.modules()) if hasattr(model, "modules") else []
    for module in modules:
        source = _module_source(type(module))
        if source is not None:
            recording.module_sources.setdefault(type(module).__name__, source)
    chosen = list(sites) if sites is not None else [
        CallSite(kind="module", target=name) for name in dict.fromkeys(type(m).__name__ for m in modules if not _is_torch_own(type(m)))
    ]
    undo: list[tuple[Any, str, Any, bool]] = []

    def wrap(function: Any, key: str, names: list[str]) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            calls = recording.calls.setdefault(key, [])
            if len(calls) < max_calls:
                calls.append(_describe_call(names, args, kwargs))
            return function(*args, **kwargs)

        return recorded

    try:
        for site in chosen:
            if site.kind == "module":
                for module in modules:
                    if type(module).__name__ == site.target:
                        had = "forward" in vars(module)
                        original = module.forward
                        module.forward = wrap(original, site.key, _parameter_names(original))
                        undo.append((module, "forward", original, had))
            else:
                owner, attribute = _resolve(site.target)
                target = getattr(owner, attribute)
                if callable(getattr(target, "run", None)) and hasattr(target, "arg_names"):
                    had = "run" in vars(target)
                    undo.append((target, "run", vars(target).get("run"), had))
                    target.run = wrap(target.run, site.key, _parameter_names(target))
                else:
                    undo.append((owner, attribute, target, True))
                    setattr(owner, attribute, wrap(target, site.key, _parameter_names(target)))
        yield recording
    finally:
        for owner, attribute, original, had in reversed(undo):
            if had:
                setattr(owner, attribute, original)
            else:
                vars(owner).pop(attribute, None)
