"""Summing individual kernel launches into the kernel table, and the shares that rank it.

Both torch.profiler's device events and the per-launch traces of other tools (rocprofv3 kernel
traces, ncu's one row per launch) arrive as launches; tools that already summarize (nsys
``cuda_gpu_kern_sum``) build records directly and only need :func:`finish`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from apex_core.profiling.names import demangle_many, is_mangled
from apex_core.profiling.records import KernelRecord, Shape

#: How many distinct input shape lists a row keeps: enough to see prefill against decode.
MAX_SHAPES = 4


@dataclass
class Launch:
    """One kernel launch (or one CPU op call) and what is known about where it came from."""

    name: str
    time_us: float
    module: str | None = None
    launch_op: str | None = None
    input_shapes: list[Shape] | None = None


@dataclass
class _Group:
    calls: int = 0
    total_us: float = 0.0
    launch_ops: Counter[str] = field(default_factory=Counter)
    shapes: list[list[Shape]] = field(default_factory=list)


def summarize_launches(launches: Iterable[Launch], device: Literal["cuda", "cpu"]) -> list[KernelRecord]:
    """One record per kernel name and module; its launching op is the one with the most of its time.

    Split by module because PyTorch's generic kernels (one ``elementwise_kernel<MulFunctor<bf16>>``
    serves every bf16 multiply) run under many modules: an RMSNorm's multiply and an MoE
    activation's are different bottlenecks, and summed into one row both would be credited to
    whichever module had the most of the time.
    """
    groups: dict[tuple[str, str | None], _Group] = defaultdict(_Group)
    for launch in launches:
        group = groups[(launch.name, launch.module or None)]
        group.calls += 1
        group.total_us += launch.time_us
        if launch.launch_op:
            group.launch_ops[launch.launch_op] += launch.time_us or 1e-9
        add_shapes(group.shapes, launch.input_shapes)
    records = [
        KernelRecord(
            name=name,
            device=device,
            calls=group.calls,
            total_time_us=group.total_us,
            mean_time_us=group.total_us / group.calls,
            share=0.0,
            module=module,
            launch_op=_most(group.launch_ops),
            input_shapes=group.shapes,
        )
        for (name, module), group in groups.items()
    ]
    return finish(records)


def add_shapes(kept: list[list[Shape]], shapes: list[Shape] | None) -> None:
    """Keep ``shapes`` if it is new and there is room (the first distinct ones seen)."""
    if shapes is None or len(kept) >= MAX_SHAPES:
        return
    normalized = [list(shape) for shape in shapes]
    if normalized not in kept:
        kept.append(normalized)


def finish(records: list[KernelRecord]) -> list[KernelRecord]:
    """Demangle names, fill in shares of the total, and sort by time, largest first."""
    readable = demangle_many(record.name for record in records if is_mangled(record.name))
    total = sum(record.total_time_us for record in records)
    finished = []
    for record in records:
        update: dict[str, object] = {"share": record.total_time_us / total if total > 0 else 0.0}
        if record.name in readable and readable[record.name] != record.name:
            update["mangled_name"] = record.name
            update["name"] = readable[record.name]
        finished.append(record.model_copy(update=update))
    return sorted(finished, key=lambda record: (-record.total_time_us, record.name, record.module or ""))


def _most(counter: Counter[str]) -> str | None:
    return counter.most_common(1)[0][0] if counter else None
