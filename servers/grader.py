"""The grader ("magpie") MCP server: grade, check, time and compare kernel solutions.

A thin layer over ``apex_core.grader``: each tool validates its arguments, runs the grading in a
worker thread (the solution itself runs in child processes, never in this server), reports
progress, writes the full result (raw timing samples included) to a JSON file under the Apex
cache directory, and returns a compact structured summary with that file's path.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from fastmcp import Context
from pydantic import BaseModel, BeforeValidator, Field

from apex_core.grader import MAX_STEP_TIMEOUT_S, GradeOptions, GradeResult, Outcome, Ranked, default_cache_dir, grade_solutions, rank
from apex_core.hardware.detect import DetectedDevice
from apex_core.hardware.specs import GpuSpec
from apex_core.hardware.target import resolve_target
from servers._common import READ_ONLY, create_server, in_thread_with_progress

mcp = create_server(
    "apex-grader",
    "Grades GPU kernel solutions for Apex tasks out of process: correctness on test and hidden shapes, "
    "interleaved timing against the baseline, score and RL reward. Solutions live at "
    "output/<task_id>/solution.py. Use check_correctness while iterating, grade_solution for the verdict, "
    "compare to rank candidates, benchmark for timing, hardware_spec for the target GPU's numbers.",
)

TaskId = Annotated[str, Field(min_length=3, description="Task id, e.g. llama-3-1-8b-instruct__rms_norm.")]
SolutionPath = Annotated[str, Field(min_length=1, description="Path of the solution file (output/<task_id>/solution.py).")]
Timeout = Annotated[float, Field(gt=0, le=MAX_STEP_TIMEOUT_S, description="Seconds any single step of the solution may take.")]


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


Measured = Annotated[
    float | None,
    BeforeValidator(_finite),
    Field(description="A measured number; null where the measurement gave no finite number (JSON has no NaN or infinity)."),
]
"""Numbers taken from timings: a NaN or infinity would travel as null (JSON has neither), so the
schema says null may come, and it comes for exactly those values."""


class ShapeTimingSummary(BaseModel):
    shape: dict[str, int]
    baseline_median_us: Measured
    solution_median_us: Measured
    speedup: Measured
    speedup_ci95: tuple[Measured, Measured]
    samples: int


class GradeSummary(BaseModel):
    """The verdict without raw samples; ``result_path`` holds the full record."""

    task_id: str
    solution_path: str
    outcome: Outcome
    reason: str
    compiled: bool
    correct: bool
    cases_passed: int
    cases_total: int
    max_abs_error: Measured
    speedup: Measured
    measured_speedup: Measured
    speedup_ci95: tuple[Measured, Measured] | None
    timings: list[ShapeTimingSummary]
    flags: list[str]
    score: float
    score_breakdown: dict[str, float]
    normalized_score: float
    rl_reward: float | None
    cached: bool
    result_path: str


def _result_path(result: GradeResult) -> Path:
    digest = result.provenance.solution_hash[:16] or "no-solution"
    return default_cache_dir() / "results" / result.task_id / f"{Path(result.solution_path).stem}-{digest}.json"


def summarize(result: GradeResult) -> GradeSummary:
    path = _result_path(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    score = result.score
    return GradeSummary(
        task_id=result.task_id,
        solution_path=result.solution_path,
        outcome=result.outcome,
        reason=result.reason,
        compiled=result.compiled,
        correct=result.correct,
        cases_passed=sum(c.passed for c in result.checks),
        cases_total=len(result.checks),
        max_abs_error=result.max_abs_error,
        speedup=result.speedup,
        measured_speedup=result.measured_speedup,
        speedup_ci95=result.speedup_ci95,
        timings=[
            ShapeTimingSummary(
                shape=t.shape,
                baseline_median_us=round(t.baseline_median_ns / 1e3, 3),
                solution_median_us=round(t.solution_median_ns / 1e3, 3),
                speedup=round(t.speedup, 4),
                speedup_ci95=(round(t.speedup_ci95[0], 4), round(t.speedup_ci95[1], 4)),
                samples=len(t.solution_samples_ns),
            )
            for t in result.timings
        ],
        flags=result.flags,
        score=score.total,
        score_breakdown={"compiled": score.compiled_points, "correct": score.correct_points, "speedup": score.speedup_points},
        normalized_score=score.normalized,
        rl_reward=result.rl_reward,
        cached=result.cached,
        result_path=str(path),
    )


async def _grade(ctx: Context | None, task_id: str, paths: list[str], options: GradeOptions, use_cache: bool) -> list[GradeResult]:
    # Progress also comes from the service's heartbeat thread.
    return await in_thread_with_progress(
        ctx, lambda progress: grade_solutions(task_id, [Path(p) for p in paths], options, use_cache=use_cache, progress=progress)
    )


Backend = Annotated[
    Literal["apex", "magpie"],
    Field(description="Who times: 'apex' (built in, default) or 'magpie' (an installed Magpie at MAGPIE_ROOT on the "
                      "grading machine); correctness is always checked by Apex."),
]


@mcp.tool(annotations=READ_ONLY)
async def grade_solution(
    task_id: TaskId,
    solution_path: SolutionPath,
    ctx: Context,
    timeout_s: Timeout = 180.0,
    use_cache: Annotated[bool, Field(description="Reuse the verdict of an earlier grading of this exact file on this "
                                                 "machine; false grades it again.")] = True,
    backend: Backend = "apex",
) -> GradeSummary:
    """Grade one solution: compile, correctness on every test and hidden shape, interleaved timing
    against the baseline, score and RL reward. Use it for the verdict once check_correctness passes."""
    results = await _grade(ctx, task_id, [solution_path], GradeOptions(timeout_s=timeout_s, backend=backend), use_cache)
    return summarize(results[0])


@mcp.tool(annotations=READ_ONLY)
async def check_correctness(task_id: TaskId, solution_path: SolutionPath, ctx: Context, timeout_s: Timeout = 180.0) -> GradeSummary:
    """Check a solution's correctness on every test and hidden shape without timing it: the fast
    loop while iterating. Reports the first failing case with the largest error and where."""
    results = await _grade(ctx, task_id, [solution_path], GradeOptions(timeout_s=timeout_s, timing=False), False)
    return summarize(results[0])


@mcp.tool(annotations=READ_ONLY)
async def benchmark(
    task_id: TaskId, solution_path: SolutionPath, ctx: Context, timeout_s: Timeout = 180.0, backend: Backend = "apex"
) -> GradeSummary:
    """Time a solution against the baseline on the task's benchmark shapes (a quick correctness gate
    on the test shapes only, one seed). Use it to compare variants; grade_solution gives the verdict."""
    options = GradeOptions(timeout_s=timeout_s, hidden_shapes=False, seeds_per_shape=1, backend=backend)
    results = await _grade(ctx, task_id, [solution_path], options, False)
    return summarize(results[0])


class Comparison(BaseModel):
    ranking: list[Ranked]
    results: list[GradeSummary]


@mcp.tool(annotations=READ_ONLY)
async def compare(
    task_id: TaskId,
    solution_paths: Annotated[list[str], Field(min_length=1, max_length=16, description="Solution files to rank.")],
    ctx: Context,
    timeout_s: Timeout = 180.0,
) -> Comparison:
    """Grade several solutions of one task and rank them: correct first, then by credited speedup.
    Use it to pick the best of several candidate files before submitting one."""
    results = await _grade(ctx, task_id, solution_paths, GradeOptions(timeout_s=timeout_s), True)
    return Comparison(ranking=rank(results), results=[summarize(r) for r in results])


class HardwareReport(BaseModel):
    origin: Literal["override", "detected", "default"]
    arch: str
    detected: DetectedDevice
    spec: GpuSpec | None
    cache_flush_bytes: int | None


@mcp.tool(annotations=READ_ONLY)
def hardware_spec(
    gpu: Annotated[str | None, Field(min_length=2, max_length=32,
                                     description="Arch or product to describe (gfx950, mi300x, h200); default: detected, else gfx950.")] = None,
) -> HardwareReport:
    """The target GPU's peak bandwidth, FLOP/s, caches, LDS and CU count, each with its public source,
    and what this machine actually has. Use it for roofline estimates."""
    target = resolve_target(gpu)
    spec = target.spec
    return HardwareReport(
        origin=target.origin, arch=target.arch, detected=target.detected, spec=spec,
        cache_flush_bytes=spec.cache_flush_bytes if spec else None,
    )


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
