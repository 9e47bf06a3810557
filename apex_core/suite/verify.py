"""Proving a task is sound and solvable: ``apex tasks verify``.

A task is only worth training on when its baseline is correct, its reference has signal, and a
solution exists that is correct and faster. This runs the real grader on the baseline (correctness
only) and on our reference solution (correctness and timing), then sets each timed shape against
the roofline and against what this device measurably sustains. Without a GPU, Triton code runs in
the interpreter at the task's ``cpu_shapes`` and nothing is timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.grader import GradeOptions, GradeResult, Outcome, grade
from apex_core.hardware.measured import MeasuredRates
from apex_core.hardware.specs import GpuSpec
from apex_core.kernels.roofline import Roofline
from apex_core.tasks.reference_solutions import reference_solution_path
from apex_core.tasks.schema import Shape, Task, load_reference

BANDWIDTH_BAR = 0.8
"""Memory-bound reference solutions should reach this fraction of the measured copy bandwidth."""


class ShapeFigures(BaseModel):
    shape: Shape
    baseline_us: float
    solution_us: float
    speedup: float
    speedup_ci95: tuple[float, float] | None = None
    floor_us: float | None = None
    bound: Literal["memory", "compute"] | None = None
    achieved_per_s: float | None = None
    """The solution's bytes/s (memory-bound) or FLOP/s (compute-bound)."""
    fraction_of_measured: float | None = None
    """``achieved_per_s`` over the measured copy bandwidth or matmul rate of this device."""


class TaskVerification(BaseModel):
    task_id: str
    passed: bool
    problems: list[str] = Field(default_factory=list)
    timed: bool
    baseline_outcome: str
    solution_outcome: str | None = None
    speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    shapes: list[ShapeFigures] = Field(default_factory=list)
    meets_bandwidth_bar: bool | None = None
    """At the largest timed shape, for memory-bound tasks: >= 80% of the measured copy bandwidth."""
    elapsed_s: float = 0.0
    phases_s: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Where the time went, per grading ('baseline', 'solution'): what to speed up when verify is slow."""


def _for_this_machine(task: Task, on_gpu: bool) -> Task:
    """Without a GPU, Triton code is checked in the interpreter at the small cpu_shapes only."""
    if on_gpu or task.language != "triton" or not task.cpu_shapes:
        return task
    return task.model_copy(update={"test_shapes": task.cpu_shapes, "hidden_shapes": [], "benchmark_shapes": []})


def measured_rate(task: Task, bound: str, rates: MeasuredRates) -> float | None:
    """What this device measurably sustains for ``task`` when ``bound`` by memory or by compute."""
    if bound == "memory":
        return rates.copy_bandwidth_bytes_per_s
    return rates.matmul_flops_per_s.get("float8_e4m3fn" if task.dtype.startswith("float8") else "bfloat16")


def shape_figures(task: Task, result: GradeResult, spec: GpuSpec | None, rates: MeasuredRates | None) -> list[ShapeFigures]:
    roofline = load_reference(task.roofline)
    figures = []
    for timing in result.timings:
        model: Roofline = roofline(timing.shape, task.dtype, task.params)
        seconds = timing.solution_median_ns / 1e9
        entry = ShapeFigures(
            shape=timing.shape,
            baseline_us=timing.baseline_median_ns / 1e3,
            solution_us=timing.solution_median_ns / 1e3,
            speedup=timing.speedup,
            speedup_ci95=timing.speedup_ci95,
            floor_us=timing.roofline_floor_ns / 1e3 if timing.roofline_floor_ns else None,
        )
        if spec is not None and task.needs_gpu:  # a CPU task's speed says nothing about the GPU's roofline
            memory_time = model.bytes_moved / spec.peak_bandwidth_bytes_per_s
            compute_time = model.flops / spec.peak_flops(task.dtype)
            entry.bound = "memory" if memory_time >= compute_time else "compute"
            entry.achieved_per_s = (model.bytes_moved if entry.bound == "memory" else model.flops) / seconds
            if rates is not None:
                measured = measured_rate(task, entry.bound, rates)
                entry.fraction_of_measured = entry.achieved_per_s / measured if measured else None
        figures.append(entry)
    return figures


def speed_problems(result: GradeResult) -> list[str]:
    """Why a timed reference solution does not prove its task solvable ([] when it does).

    Overall it must be significantly faster. Per shape, only a significant loss counts: where the
    baseline already runs at the copy bandwidth (DeepSeek's silu_and_mul at 8192 tokens) or at the
    launch floor (4 decode tokens), a solution can only tie it. The grader's intervals include the
    spread between worker processes (``stats.with_between_process_spread``), or what is left of it
    after the correction by the solution worker's measured shift (``stats.with_process_shift``), so
    a tie's interval reaches 1.0; before they did, ties at the launch floor failed or passed by
    chance.
    """
    problems = []
    if not result.speedup or result.speedup <= 1.0:
        problems.append(f"reference solution is not faster than the baseline ({result.measured_speedup or 0:.3f}x, not significant)")
    slower = [t.shape for t in result.timings if t.speedup_ci95[1] < 1.0]
    if slower:
        problems.append(f"reference solution is slower than the baseline at {slower} (95% interval below 1.0)")
    return problems


def verify_task(
    task: Task,
    on_gpu: bool,
    spec: GpuSpec | None = None,
    rates: MeasuredRates | None = None,
    options: GradeOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> TaskVerification:
    """Grade the baseline (correctness) and our reference solution (correctness and timing)."""
    say = progress or (lambda message: None)
    options = options or GradeOptions()
    checked = _for_this_machine(task, on_gpu)
    problems: list[str] = []
    say(f"{task.id}: checking the baseline")
    started = time.monotonic()
    baseline = grade(checked, task.baseline_path, options.model_copy(update={"timing": False}))
    if baseline.outcome is not Outcome.ok:
        problems.append(f"baseline: {baseline.outcome.value}: {baseline.reason}")
    verification = TaskVerification(task_id=task.id, passed=False, timed=False, baseline_outcome=baseline.outcome.value)
    verification.phases_s["baseline"] = baseline.phases_s
    solution_path = reference_solution_path(task)
    if solution_path is None:
        problems.append(f"no reference solution under reference_solutions/{task.kernel}/ (solution.* or {task.model}.*)")
    else:
        say(f"{task.id}: grading the reference solution")
        timed = on_gpu and options.timing
        result = grade(checked, solution_path, options.model_copy(update={"timing": timed}))
        verification.solution_outcome = result.outcome.value
        verification.phases_s["solution"] = result.phases_s
        verification.timed = bool(result.timings)
        if result.outcome is not Outcome.ok:
            problems.append(f"reference solution: {result.outcome.value}: {result.reason}")
        problems.extend(f"reference solution flagged: {flag}" for flag in result.flags if flag.startswith(("no_custom_kernel", "below_roofline")))
        if result.timings:
            verification.speedup, verification.speedup_ci95 = result.speedup, result.speedup_ci95
            verification.shapes = shape_figures(task, result, spec, rates)
            problems.extend(speed_problems(result))
            largest = verification.shapes[-1] if verification.shapes else None
            if largest is not None and largest.bound == "memory" and largest.fraction_of_measured is not None:
                verification.meets_bandwidth_bar = largest.fraction_of_measured >= BANDWIDTH_BAR
    verification.problems = problems
    verification.passed = not problems
    verification.elapsed_s = round(time.monotonic() - started, 3)
    return verification
