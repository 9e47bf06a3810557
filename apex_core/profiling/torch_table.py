"""torch.profiler's events turned into the kernel table: device kernels on a GPU, CPU ops on the CPU."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from torch.autograd import DeviceType

from apex_core.profiling.modules import ModuleRanges, module_of_range
from apex_core.profiling.records import KernelRecord, Shape
from apex_core.profiling.table import Launch, add_shapes, finish, summarize_launches

#: Events the profiler records about itself, not work the profiled code did.
BOOKKEEPING_PREFIXES = ("ProfilerStep", "[memory]", "[OutOfMemory]", "Activity Buffer Request", "Profiler", "Memory Profiler")

CpuGrouping = Literal["module", "op"]


def innermost_module(event: Any) -> str | None:
    """The class of the nearest enclosing ``nn.Module:`` range of a CPU event (itself included)."""
    while event is not None:
        module = module_of_range(event.name)
        if module is not None:
            return module
        event = event.cpu_parent
    return None


def _shapes(event: Any) -> list[Shape] | None:
    shapes = getattr(event, "input_shapes", None)
    return [list(shape) for shape in shapes] if shapes else None


def is_cpu_op(event: Any) -> bool:
    """A CPU event that is an op of the profiled code, not a range, Python frame or bookkeeping."""
    return (
        event.device_type == DeviceType.CPU
        and not event.is_async
        and not event.is_user_annotation
        and not event.is_python_function
        and not event.name.startswith(BOOKKEEPING_PREFIXES)
    )


def gpu_table(events: Sequence[Any]) -> list[KernelRecord]:
    """One row per device kernel (and memcpy/memset), linked to its launching op and module.

    torch attaches each device kernel to the CPU op that launched it (``FunctionEvent.kernels``,
    in every torch 2.x; ``linked_correlation_id`` on the events exists only from about 2.12 on, and
    the H200's torch 2.11 has none). Device kernels no op claims (a launch the profiler could not
    correlate) still count, with no launcher.
    """
    launches = []
    claimed: Counter[tuple[str, float]] = Counter()
    for event in events:
        if event.device_type != DeviceType.CPU or event.is_async or not getattr(event, "kernels", None):
            continue
        launch_op = None if module_of_range(event.name) is not None else event.name
        for kernel in event.kernels:
            claimed[(kernel.name, kernel.duration)] += 1
            launches.append(
                Launch(name=kernel.name, time_us=kernel.duration, module=innermost_module(event), launch_op=launch_op,
                       input_shapes=_shapes(event) if launch_op else None)
            )
    for event in events:
        if event.device_type not in (DeviceType.CUDA, DeviceType.HIP):
            continue
        if getattr(event, "is_user_annotation", False) or module_of_range(event.name) is not None:
            continue  # a range (ours, or record_function's) drawn on the GPU timeline: no kernel
        key = (event.name, event.time_range.end - event.time_range.start)
        if claimed[key]:
            claimed[key] -= 1
        else:
            launches.append(Launch(name=event.name, time_us=key[1]))
    return summarize_launches(launches, "cuda")


def _exclusive_us(range_event: Any) -> float:
    """A module range's duration less the ranges of the modules called inside it."""
    nested, stack = 0.0, list(getattr(range_event, "cpu_children", []) or [])
    while stack:
        child = stack.pop()
        if module_of_range(child.name) is not None:
            nested += child.time_range.end - child.time_range.start
        else:
            stack.extend(getattr(child, "cpu_children", []) or [])
    return max(0.0, range_event.time_range.end - range_event.time_range.start - nested)


def cpu_table(events: Sequence[Any], ranges: ModuleRanges | None, grouping: CpuGrouping = "module") -> list[KernelRecord]:
    """CPU ops by self time; with ``grouping="module"`` the ops of a module class form one row."""
    if grouping == "op":
        return summarize_launches(
            (Launch(e.name, e.self_cpu_time_total, innermost_module(e), None, _shapes(e)) for e in events if is_cpu_op(e)),
            "cpu",
        )
    module_calls: Counter[str] = Counter()
    module_time: Counter[str] = Counter()
    for event in events:
        module = module_of_range(event.name) if event.device_type == DeviceType.CPU else None
        if module is not None:
            module_calls[module] += 1
            module_time[module] += _exclusive_us(event)
    module_ops: dict[str, Counter[str]] = defaultdict(Counter)
    loose: list[Launch] = []
    for event in events:
        if not is_cpu_op(event):
            continue
        module = innermost_module(event)
        if module is None:
            loose.append(Launch(event.name, event.self_cpu_time_total, None, None, _shapes(event)))
        else:
            module_ops[module][event.name] += event.self_cpu_time_total
    records = summarize_launches(loose, "cpu")
    for module in module_time:
        ops = module_ops.get(module, Counter())
        # The module's own wall time, less its submodules': what its forward costs, NumPy or
        # Python work included, which no aten op's self time would show.
        total = max(module_time[module], sum(ops.values()))
        calls = module_calls[module] or 1
        shapes: list[list[Shape]] = []
        for seen in (ranges.input_shapes.get(module, []) if ranges else []):
            add_shapes(shapes, seen)
        records.append(
            KernelRecord(
                name=f"nn.Module: {module}",
                device="cpu",
                calls=calls,
                total_time_us=total,
                mean_time_us=total / calls,
                share=0.0,
                module=module,
                input_shapes=shapes,
                ops=[op for op, _ in ops.most_common()],
            )
        )
    return finish(records)
