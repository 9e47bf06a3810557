"""The calibration stage: how the solution's own process shifts short GPU calls, measured on our
baseline before any solution code runs in that process.

Two GPU processes time one 4-8 us kernel a few percent apart, and none of the causes tried (the
flush, where buffers, outputs or code sit, batching, the SM clock) set the shift
(docs/benchmarks.md). The shift is largely common to the kernels a process runs at one shape: on
an H200 the baseline and a faster kernel timed in the same processes had medians whose ratio
varied 2.5-4x less between processes than either median. So the candidate's fresh worker first
loads our baseline and times it against the baseline's worker at each short timed shape. The
ratio of the two corrects the solution's speedup at that shape later (``timing.time_shape``); the
shift moves a little by then, which the interval allows for (``stats.CALIBRATED_RESIDUAL_SPREAD``).
"""

from __future__ import annotations

import shutil

from apex_core.grader import stats
from apex_core.grader.isolation import protocol
from apex_core.grader.grading import Grading, require_ok
from apex_core.grader.isolation.process import WorkerProcess
from apex_core.grader.state import STATE
from apex_core.grader.timing import launch_cover_ns, stage, time_rounds, timing_plan


def calibrates(run: Grading) -> bool:
    """Whether the solution's worker measures its own shift first: on a GPU, timing with our own
    backend, for baselines written in Python (a native baseline would build its extension in the
    solution's worker)."""
    return (
        run.on_gpu and run.options.timing and run.options.backend == "apex"
        and run.task.baseline_path.suffix == ".py"
    )


def calibrate(run: Grading, candidate: WorkerProcess, shorter_than_ns: float = stats.SHORT_CALL_NS) -> None:
    """Load our baseline into the solution's fresh worker and measure its shift at each short
    timed shape (into ``run.corrections``).

    Shapes whose baseline call takes ``shorter_than_ns`` or more are skipped (known from an
    earlier grading in this process, else after one round): there processes differ by a few
    tenths of a percent, which the interval takes.
    """
    control_cache = candidate.scratch / "control-compile"
    trusted_cache = run.baseline_compile_cache()
    if trusted_cache.is_dir():
        # A copy of our baseline's compiled kernels, so the control compiles nothing; made
        # fresh for this worker, so nothing the solution later writes there matters.
        shutil.copytree(trusted_cache, control_cache, dirs_exist_ok=True)
    with run.phase("calibration.load"):
        run.load_into(candidate, run.task.baseline_path, control_cache)
    run.calibrated_worker = candidate
    with run.baseline_worker() as baseline:
        workers = {"baseline": baseline, "solution": candidate}
        for index, shape in enumerate(run.task.timed_shapes):
            known = STATE.baseline_medians.get(run.baseline_median_key(shape))
            if known is not None and known >= shorter_than_ns:
                continue
            seeds, buffers, flush = timing_plan(run, shape, index)
            with run.phase("calibration.stage"):
                launch_ns = stage(workers, shape, seeds, buffers)
            with run.phase("calibration.rounds"):
                timed = time_rounds(run, workers, flush, launch_cover_ns(launch_ns["baseline"]), give_up_above_ns=shorter_than_ns)
            if timed is None:
                continue
            for name, worker in workers.items():
                reply, _ = worker.request(protocol.Keep(name=run.kept_stage(index)))
                require_ok(reply, name)
            samples, _ = timed
            factor = stats.median(samples["solution"]) / max(stats.median(samples["baseline"]), 1e-9)
            draws = stats.bootstrap_speedup_draws(
                samples["solution"], samples["baseline"], run.options.bootstrap_draws, seed=10_000 + index
            )
            run.corrections[index] = (factor, draws)
