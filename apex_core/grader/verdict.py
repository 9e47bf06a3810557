"""From a grading's state to its result: the outcome after the checks that follow the run
(the source prescan's hard findings, the integrity snapshot, the roofline floor), the credited
speedup, the score and RL reward, and the provenance that says how it was all measured."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import apex_core
from apex_core.grader import fingerprint, integrity, prescan, stats
from apex_core.grader.fingerprint import Clocks
from apex_core.grader.grading import Grading
from apex_core.grader.result import GradeResult, Outcome, Provenance
from apex_core.grader.solution_file import file_hash
from apex_core.grader.state import STATE
from apex_core.score import kernel_score, rl_reward
from apex_core.tasks.schema import Task

GRADER_NAME = "apex"


def with_prescan(
    findings: list[prescan.Finding], outcome: Outcome, reason: str
) -> tuple[Outcome, str]:
    """A hard finding in the source (``prescan.HARD_KINDS``) outranks every outcome the
    solution's own behaviour could earn."""
    hard = [f for f in findings if f.kind in prescan.HARD_KINDS]
    if hard and outcome in (Outcome.ok, Outcome.wrong_answer, Outcome.runtime_error):
        return Outcome.tampering, f"line {hard[0].line}: {hard[0].detail}"
    return outcome, reason


def with_integrity(run: Grading, snapshot: integrity.Snapshot, outcome: Outcome, reason: str) -> tuple[Outcome, str]:
    """Compare Apex's files and the installed libraries with the snapshot taken before the run.

    Unconfined, the solution could have written them: a change is tampering, Apex's files are
    put back and a changed library marks the environment dirty. Confined, the solution saw them
    read-only or not at all, so a change came from outside the grading (a developer's edit, a
    package upgrade): the grading is void (``infra_error``) and nothing is put back, so that no
    one's edit is lost.
    """
    changes = integrity.compare(snapshot)
    if not changes:
        return outcome, reason
    if not run.options.unconfined:
        return Outcome.infra_error, (
            f"Apex's files or the installed libraries changed while the solution was graded ({changes.describe()}); "
            "the confined solution could not write them, so another process did: grade again once they stay unchanged"
        )
    integrity.restore(snapshot, changes)
    if changes.library_files:
        STATE.dirty_environment.append(str(changes.library_files[0]))
    run.flags.append(f"tampering: {changes.describe()}")
    return Outcome.tampering, changes.describe()


def result(
    run: Grading, outcome: Outcome, reason: str, compiled: bool, correct: bool, clocks_before: Clocks | None,
    clocks_after: Clocks | None,
) -> GradeResult:
    """The result of a finished grading, with what its timings earn."""
    measured = credited = None
    interval_all = None
    if run.timings and outcome in (Outcome.ok, Outcome.tampering):
        measured = stats.geometric_mean([t.speedup for t in run.timings])
        combined = np.exp(np.mean([np.log(d) for d in run.speedup_draws], axis=0))
        interval_all = stats.interval(combined)
        credited = 1.0 if interval_all[0] <= 1.0 <= interval_all[1] else measured
        below = [t for t in run.timings if t.roofline_floor_ns and t.solution_median_ns < t.roofline_floor_ns]
        if below:
            run.flags.append(
                f"below_roofline_floor: {below[0].solution_median_ns:.0f} ns measured, floor {below[0].roofline_floor_ns:.0f} ns"
            )
            outcome, reason = Outcome.tampering, "measured faster than the hardware allows"
        if outcome is Outcome.tampering:
            credited = min(credited, 1.0)
        if run.no_custom_kernel:
            credited = None  # a correct answer, but not one made by the solution's own kernel
    if outcome is Outcome.infra_error:
        compiled = correct = False  # never blame the candidate for our failure; no score either way

    task, options = run.task, run.options
    return GradeResult(
        task_id=task.id,
        solution_path=str(run.solution),
        outcome=outcome,
        reason=reason,
        compiled=compiled,
        correct=correct,
        speedup=credited,
        measured_speedup=measured,
        speedup_ci95=interval_all,
        baseline_median_ns=stats.geometric_mean([t.baseline_median_ns for t in run.timings]) if run.timings else None,
        solution_median_ns=stats.geometric_mean([t.solution_median_ns for t in run.timings]) if run.timings else None,
        checks=run.checks,
        timings=run.timings,
        flags=run.flags,
        score=kernel_score(compiled, correct, credited if correct else None, tampering=outcome is Outcome.tampering),
        rl_reward=rl_reward(outcome.value, correct, credited if correct else None, own_work=not run.no_custom_kernel),
        provenance=provenance(
            task, run.solution, run.device, options.public_seed, clocks_before, run.timing_method, clocks_after,
            options.unconfined,
        ),
        elapsed_s=round(time.monotonic() - run.started, 3),
        phases_s=run.phases,
    )


def provenance(
    task: Task,
    solution: Path | None,
    device_name: str,
    public_seed: int,
    clocks_before: Clocks | None = None,
    timing_method: str = "",
    clocks_after: Clocks | None = None,
    unconfined: bool = False,
) -> Provenance:
    on_gpu = device_name != "cpu"
    env = fingerprint.environment(on_gpu)
    return Provenance(
        task_hash=task.content_hash(),
        solution_hash=file_hash(solution) if solution is not None and solution.is_file() else "",
        grader=GRADER_NAME,
        grader_version=apex_core.__version__,
        environment=env,
        environment_key=env.key(),
        clocks_before=clocks_before,
        clocks_after=clocks_after,
        timing_method=timing_method
        or (
            "cuda events per call after a device spin sized from the baseline's launch time, cache flush of 2x the "
            "last-level cache, inputs drawn afresh for every call, interleaved A/B, adaptive; calls under 20 us corrected by "
            "the solution worker's own shift, measured on the baseline before the solution was imported; other "
            "speedup intervals widened by the measured spread between worker processes"
            if on_gpu
            else "perf_counter_ns per call, inputs drawn afresh for every call, interleaved A/B, adaptive"
        ),
        public_seed=public_seed,
        unconfined=unconfined,
    )


def result_without_solution(task: Task, solution: Path, reason: str) -> GradeResult:
    """The result for an agent that left no usable solution file: nothing compiled, no points."""
    return GradeResult(
        task_id=task.id,
        solution_path=str(solution),
        outcome=Outcome.compile_error,
        reason=reason,
        compiled=False,
        correct=False,
        score=kernel_score(False, False, None),
        rl_reward=rl_reward(Outcome.compile_error.value, False, None),
        provenance=provenance(task, None, "cpu", 0),
        elapsed_s=0.0,
    )
