"""The Magpie timing inside an Apex grading: Magpie times baseline and solution, and the grading
turns its per-shape samples into our timings, intervals, floors and ceiling check."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

from apex_core.grader import stats
from apex_core.grader.grading import Grading, GradingFailed, machine
from apex_core.grader.magpie.errors import MagpieError
from apex_core.grader.magpie.timing import run_magpie_timing
from apex_core.grader.result import Outcome, ShapeTiming


def time_with_magpie(run: Grading) -> None:
    """Let an installed Magpie time baseline and solution; floors and ceilings stay ours."""
    task = run.task
    scratch = Path(tempfile.mkdtemp(prefix="apex-magpie-"))
    try:
        timing = run_magpie_timing(
            task, task.baseline_path, run.solution, task.timed_shapes, run.options.timeout_s, scratch,
            seed=secrets.randbits(31),
        )
    except MagpieError as error:
        raise GradingFailed(Outcome(error.outcome), f"Magpie: {error}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _, spec = machine()
    run.timing_method = f"Magpie ({timing.timing_method})"
    for index, measured in enumerate(timing.shapes):
        baseline = [int(round(v)) for v in measured.baseline_samples_ns] or [int(measured.baseline_median_ns)]
        solution = [int(round(v)) for v in measured.solution_samples_ns] or [int(measured.solution_median_ns)]
        draws = stats.bootstrap_speedup_draws(baseline, solution, run.options.bootstrap_draws, seed=index)
        if run.on_gpu:
            draws = stats.with_between_process_spread(draws, measured.baseline_median_ns)
        run.speedup_draws.append(draws)
        run.timings.append(
            ShapeTiming(
                shape=measured.shape,
                baseline_median_ns=measured.baseline_median_ns,
                solution_median_ns=measured.solution_median_ns,
                speedup=measured.speedup,
                speedup_ci95=stats.interval(draws),
                baseline_samples_ns=baseline,
                solution_samples_ns=solution,
                roofline_floor_ns=run.floor_ns(measured.shape, spec),
            )
        )
    overall = stats.geometric_mean([t.speedup for t in run.timings])
    if overall > task.speedup_ceiling:
        # Magpie has no hardened mode of ours; an implausible speedup earns nothing from it.
        raise GradingFailed(
            Outcome.tampering,
            f"Magpie measured {overall:.2f}x, above the task's {task.speedup_ceiling:g}x ceiling; "
            "grade with the apex backend to have it re-measured",
        )
