"""From Magpie's report to per-shape timings, and the judge's one entry point."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from apex_core.grader.isolation import process
from apex_core.grader.magpie.errors import LatencyMethod, MagpieError
from apex_core.grader.magpie.install import require_magpie_root
from apex_core.grader.magpie.report import MagpieKernelResult, MagpieReport, parse_compare_report
from apex_core.grader.magpie.run import REPORT_NAME, check_run, find_report, read_report, run_magpie
from apex_core.grader.magpie.workspace import MagpieLatency, write_magpie_workspace
from apex_core.tasks.schema import Shape, Task


class MagpieShapeTiming(BaseModel):
    """Baseline and solution at one shape as Magpie timed them (nanoseconds per call)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: dict[str, int]
    baseline_median_ns: float
    solution_median_ns: float
    speedup: float
    baseline_samples_ns: list[float]
    solution_samples_ns: list[float]


class MagpieTiming(BaseModel):
    """Magpie's timing of one grading: per-shape medians, raw numbers and where they came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    method: str
    """The latency method Magpie states (cuda_graph, kernel_trace or both)."""
    metric: Literal["wall", "kernel"]
    timing_method: str
    shapes: list[MagpieShapeTiming]
    kernels: list[MagpieKernelResult]
    seed: int
    report_path: str
    magpie_root: str
    command: list[str]
    wall_s: float


def _kernel_failure(kernel: MagpieKernelResult, method: LatencyMethod) -> MagpieError | None:
    who = "the baseline" if kernel.role == "baseline" else "the solution"
    at = f"at shape {json.dumps(kernel.shape, separators=(',', ':'))}"
    detail = f": {kernel.errors}" if kernel.errors else ""
    if kernel.compiling_state == "FAILED":
        return MagpieError("compile_failed", f"Magpie could not compile {who}{detail}", kernel.role)
    if kernel.correctness_state == "FAILED":
        return MagpieError("run_failed", f"{who} failed when Magpie ran it {at}{detail}", kernel.role)
    if kernel.latency_state is None:
        return MagpieError(
            "no_latency",
            "this Magpie reports no Latency stage (no latency_state in its report); Apex needs a Magpie with bench_target latency support",
        )
    if kernel.latency_state != "SUCCESS":
        if kernel.latency_state == "SKIPPED":
            return MagpieError("no_latency", f"Magpie skipped the latency stage for {who} {at}{detail}")
        return MagpieError("run_failed", f"Magpie could not time {who} {at}{detail}", kernel.role)
    if kernel.method != method:
        return MagpieError("malformed_report", f"Magpie states it timed {who} with {kernel.method!r}, not the {method!r} Apex asked for")
    if kernel.median_ns is None:
        what = "wall-clock" if method == "cuda_graph" else "kernel-only"
        return MagpieError("run_failed", f"Magpie reported no {what} latency for {who} {at}{detail}", kernel.role)
    return None


def timing_from_report(
    report: MagpieReport,
    task_id: str,
    latency: MagpieLatency,
    *,
    seed: int = 0,
    magpie_root: str = "",
    command: Sequence[str] = (),
    wall_s: float = 0.0,
) -> MagpieTiming:
    """Per-shape medians from a validated report, or the first failure (the baseline's before the solution's)."""
    for role in ("baseline", "solution"):
        for kernel in report.kernels:
            if kernel.role == role and (failure := _kernel_failure(kernel, latency.method)) is not None:
                raise failure
    by_shape: dict[int, dict[str, MagpieKernelResult]] = {}
    for kernel in report.kernels:
        by_shape.setdefault(kernel.shape_index, {})[kernel.role] = kernel
    shapes = []
    for index in sorted(by_shape):
        pair = by_shape[index]
        if set(pair) != {"baseline", "solution"}:
            raise MagpieError("malformed_report", f"{REPORT_NAME} lacks a baseline or solution entry for shape {index}")
        base, sol = pair["baseline"], pair["solution"]
        assert base.median_ns is not None and sol.median_ns is not None
        shapes.append(
            MagpieShapeTiming(
                shape=base.shape,
                baseline_median_ns=base.median_ns,
                solution_median_ns=sol.median_ns,
                speedup=base.median_ns / sol.median_ns,
                baseline_samples_ns=base.samples_ns,
                solution_samples_ns=sol.samples_ns,
            )
        )
    described = {
        "cuda_graph": "wall-clock over CUDA/HIP graph replay (do_bench_cudagraph)",
        "kernel_trace": "kernel-only durations from rocprofv3 --kernel-trace",
        "both": "kernel-only durations from rocprofv3 (wall-clock graph replay kept alongside)",
    }[latency.method]
    return MagpieTiming(
        task_id=task_id,
        method=latency.method,
        metric=latency.metric,
        timing_method=(
            f"magpie:{latency.method}: {described}; one input set per shape, no cache flush, "
            f"median of {latency.n_retries} retries of ~{latency.rep_ms} ms"
        ),
        shapes=shapes,
        kernels=report.kernels,
        seed=seed,
        report_path=report.path,
        magpie_root=magpie_root,
        command=list(command),
        wall_s=wall_s,
    )


# --- the judge's entry point ---------------------------------------------------------------------


def run_magpie_timing(
    task: Task,
    baseline_path: Path,
    solution_path: Path,
    shapes: Sequence[Shape],
    timeout_s: float,
    scratch: Path,
    *,
    seed: int = 0,
    latency: MagpieLatency | None = None,
    visible_devices: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> MagpieTiming:
    """Time baseline and solution at ``shapes`` with Magpie; MagpieError (one line) when it cannot.

    Raises MagpieNotInstalledError (an ApexUserError) when MAGPIE_ROOT names no usable Magpie.
    ``scratch`` receives the workspace (configs, per-entry directories, Magpie's output and log)
    and is left in place for inspection; the caller removes it. When the judge runs as root,
    Magpie runs as the sandbox user, so MAGPIE_ROOT and the parents of ``scratch`` must be
    readable by that user (a ``tempfile.mkdtemp()`` directory is). ``seed`` is the public seed of
    Magpie's inputs (shape i uses ``seed + i``); pass a fresh random one per grading.
    """
    root = require_magpie_root(environ)
    latency = latency or MagpieLatency()
    identity = process.sandbox_identity()
    workspace = write_magpie_workspace(
        task,
        Path(baseline_path),
        Path(solution_path),
        shapes,
        Path(scratch),
        magpie_root=root,
        seed=seed,
        latency=latency,
        stage_timeout_s=max(10.0, min(300.0, timeout_s / 2)),
        owner=identity,
    )
    run = run_magpie(workspace, timeout_s, identity=identity, visible_devices=visible_devices)
    check_run(run, workspace, timeout_s)
    report_path = find_report(Path(workspace.output_dir))
    report = parse_compare_report(read_report(report_path), workspace.entries, latency.method, path=str(report_path))
    return timing_from_report(
        report,
        task.id,
        latency,
        seed=seed,
        magpie_root=str(root),
        command=run.argv,
        wall_s=run.wall_s,
    )
