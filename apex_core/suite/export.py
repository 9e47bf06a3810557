"""Tasks as JSON lines for RL and SFT frameworks: ``apex tasks export --format jsonl``.

One line per task with everything a trainer needs to pose it and check it offline: the prompts,
the baseline, the reference's source, shapes, tolerances and metadata. Our reference solution is
included only when asked for (``--with-solutions``), as the supervised target; exports meant for
graded agents must not carry it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from pydantic import BaseModel

from apex_core.hardware.target import HardwareTarget
from apex_core.prompts import build_record
from apex_core.tasks.reference_solutions import reference_solution_source
from apex_core.tasks.schema import Shape, Task, Tolerance, load_reference


class ExportRecord(BaseModel):
    task_id: str
    model: str
    also_models: list[str] = []
    """Other models that run this kernel at exactly these shapes (``Task.also_models``)."""
    kernel: str
    language: str
    difficulty: int
    target_arch: str
    system: str
    prompt: str
    solution_path: str
    entry_point: str
    signature: str
    baseline: str
    reference: str
    test_shapes: list[Shape]
    benchmark_shapes: list[Shape]
    tolerances: dict[str, Tolerance]
    task_hash: str
    reference_solution: str | None = None


def export_records(tasks: list[Task], target: HardwareTarget, with_solutions: bool = False) -> Iterator[ExportRecord]:
    for task in sorted(tasks, key=lambda t: t.id):
        prompt = build_record(task, target)
        solution = reference_solution_source(task) if with_solutions else None
        yield ExportRecord(
            task_id=task.id,
            model=task.model,
            also_models=list(task.also_models),
            kernel=task.kernel,
            language=task.language,
            difficulty=task.difficulty,
            target_arch=target.arch,
            system=prompt.system,
            prompt=prompt.prompt,
            solution_path=prompt.solution_path,
            entry_point=task.entry_point,
            signature=task.signature,
            baseline=task.baseline_source,
            reference=inspect.getsource(load_reference(task.reference)),
            test_shapes=task.test_shapes,
            benchmark_shapes=task.timed_shapes,
            tolerances=task.tolerances,
            task_hash=task.content_hash(),
            reference_solution=solution,
        )
