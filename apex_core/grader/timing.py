"""The timing stage: baseline and solution in two workers, interleaved in alternating rounds.

Each timed shape is staged (input sets drawn by the workers from the judge's seeds), warmed up,
then timed in short requests until both medians are stable or the budget is spent; every timed
call draws fresh inputs from a per-call seed (``rotation``), device caches are flushed before
every GPU sample, and the device spins while the host launches each call. After the rounds come
the checks on what was timed (``timed_checks``). A speedup above the task's ceiling is measured
again, hardened, and the lower figure is credited (``time_with_ceiling``).
"""

from __future__ import annotations

import secrets
import time

from apex_core.grader import stats, timed_checks
from apex_core.grader.isolation import protocol
from apex_core.grader.grading import Grading, case_seed, machine, require_ok
from apex_core.grader.isolation.process import WorkerProcess
from apex_core.grader.result import ShapeTiming
from apex_core.grader.isolation.rotation import CallRotation
from apex_core.grader.state import STATE
from apex_core.hardware.specs import GpuSpec
from apex_core.tasks.schema import Shape

DEFAULT_FLUSH_BYTES = 512 * 1024**2
CALL_BUFFERS = 3
"""Timed calls rotate over at least this many input buffers, each refilled with inputs drawn afresh
before every call (``rotation``)."""
SMALL_CALL_BUFFERS = 8
SMALL_CALL_BYTES = 32 * 1024**2
"""Calls that move up to this many bytes (roofline: reads and writes) get SMALL_CALL_BUFFERS buffers:
more allocations averaged over, so where the memory happens to sit moves a small kernel's median
less from one grading to the next."""
REPRODUCE_FRACTION = 0.8
MIN_ROUNDS = 6
MAX_REPS_PER_REQUEST = 32
"""Timing alternates baseline and solution in short requests (about 20 ms of device time each for
small kernels) and at least MIN_ROUNDS of them, so drift in clocks or temperature falls on both
alike; longer requests let it fall on one side (docs/grader.md, 'Measured reasons')."""
COVER_FACTOR = 3
COVER_MARGIN_NS = 20_000
MIN_COVER_NS = 50_000
MAX_COVER_NS = 1_000_000
"""Before each timed GPU call the device spins while the host launches it. The spin lasts
COVER_FACTOR times the baseline's launch time at that shape plus COVER_MARGIN_NS, within
[MIN_COVER_NS, MAX_COVER_NS]: sized from the baseline's launch, not the solution's, so that a
solution moving work to the host before its launch has it timed rather than hidden."""


def launch_cover_ns(baseline_launch_ns: int) -> int:
    return int(min(MAX_COVER_NS, max(MIN_COVER_NS, COVER_FACTOR * baseline_launch_ns + COVER_MARGIN_NS)))


def timing_plan(run: Grading, shape: Shape, index: int) -> tuple[list[int], int, int]:
    """(seeds, call buffers, flush bytes) of timed shape number ``index``."""
    options = run.options
    seeds = [case_seed(options.public_seed, run.secret_seed, 1000 + index, k) for k in range(run.input_sets(shape))]
    buffers = SMALL_CALL_BUFFERS if run.call_bytes(shape) <= SMALL_CALL_BYTES else CALL_BUFFERS
    if not run.on_gpu:
        return seeds, buffers, 0
    _, spec = machine()
    return seeds, buffers, spec.cache_flush_bytes if spec else DEFAULT_FLUSH_BYTES


def stage(
    workers: dict[str, WorkerProcess], shape: Shape, seeds: list[int], buffers: int, kept: str | None = None
) -> dict[str, int]:
    """Stage the inputs (or take up the stage the workers kept as ``kept``) and warm up in each
    worker; their host launch times."""
    launch_ns: dict[str, int] = {}
    for name, worker in workers.items():
        if kept is not None:
            request: protocol.Request = protocol.Select(name=kept)
        else:
            request = protocol.Stage(shape=shape, seeds=tuple(seeds), buffers=buffers)
        reply, _ = worker.request(request)
        require_ok(reply, name)
        reply, _ = worker.request(protocol.Warmup(min_calls=10, min_seconds=0.025))
        require_ok(reply, name)
        launch_ns[name] = int(reply.get("launch_ns", 0))
    return launch_ns


def time_rounds(
    run: Grading, workers: dict[str, WorkerProcess], flush: int, cover_ns: int, rotation: CallRotation | None = None,
    give_up_above_ns: float | None = None,
) -> tuple[dict[str, list[int]], dict[str, int]] | None:
    """Samples of the two workers, timed in alternating rounds until both medians are stable
    or the budget is spent; with the Python threads each had. ``rotation`` follows the
    solution's call buffers. None if, after the first round, the baseline's median is above
    ``give_up_above_ns``."""
    samples: dict[str, list[int]] = {name: [] for name in workers}
    threads: dict[str, int] = {}
    reps = 5
    deadline = time.monotonic() + run.options.time_budget_s
    round_index = 0
    while True:
        order = list(workers.items())
        if round_index % 2:
            order.reverse()
        for name, worker in order:
            request_key = secrets.randbits(62)
            reply, _ = worker.request(protocol.Time(reps=reps, request_key=request_key, flush_bytes=flush, cover_ns=cover_ns))
            require_ok(reply, name)
            if name == "solution" and rotation is not None:
                rotation.timed_request(reps, request_key)
            samples[name].extend(int(s) for s in reply["samples_ns"])
            threads[name] = int(reply.get("python_threads", 0))
        round_index += 1
        if round_index == 1 and give_up_above_ns is not None and stats.median(samples["baseline"]) > give_up_above_ns:
            return None
        enough = round_index >= MIN_ROUNDS and all(len(v) >= run.options.min_samples for v in samples.values())
        stable = all(
            stats.relative_standard_error_of_median(v, robust=run.on_gpu) < run.options.target_rse for v in samples.values()
        )
        if (enough and stable) or time.monotonic() >= deadline:
            return samples, threads
        # Grow the chunk so that per-request overhead stays small for fast kernels.
        slowest = max(stats.median(v) for v in samples.values())
        reps = int(min(MAX_REPS_PER_REQUEST, max(5, 0.05e9 / max(slowest, 1.0))))


def time_shape(
    run: Grading, baseline: WorkerProcess, candidate: WorkerProcess, shape: Shape, index: int, spec: GpuSpec | None
) -> ShapeTiming:
    on_gpu = run.on_gpu
    # Each worker draws the input sets on the device from these seeds, as the judge does for
    # the references: nothing large crosses a pipe.
    seeds, buffers, flush = timing_plan(run, shape, index)
    workers = {"baseline": baseline, "solution": candidate}
    # A calibrated shape is timed on the stages its calibration used, in both workers: a
    # process's shift at a short call can change from one staging to the next.
    calibrated = candidate is run.calibrated_worker and index in run.corrections
    with run.phase("timing.stage"):
        launch_ns = stage(workers, shape, seeds, buffers, kept=run.kept_stage(index) if calibrated else None)
    cover_ns = launch_cover_ns(launch_ns["baseline"]) if on_gpu else 0
    # The judge's own account of which input set each of the solution's buffers held.
    rotation = CallRotation(len(seeds), buffers)
    with run.phase("timing.rounds"):
        timed = time_rounds(run, workers, flush, cover_ns, rotation)
    assert timed is not None
    samples, threads = timed
    with run.phase("timing.outputs"):
        timed_checks.check_timed_outputs(run, candidate, shape, rotation)
    if on_gpu:
        with run.phase("timing.wall_clock"):
            timed_checks.check_wall_clock(run, baseline, candidate, shape, cover_ns)
    if index == 0 and on_gpu:
        with run.phase("trace"):
            timed_checks.check_trace(run, baseline, candidate)
    if threads.get("solution", 0) > threads.get("baseline", 0):
        run.flags.append(f"spawned_threads: {threads['solution'] - threads['baseline']} extra Python threads")
    b_med, s_med = stats.median(samples["baseline"]), stats.median(samples["solution"])
    STATE.baseline_medians[run.baseline_median_key(shape)] = b_med
    draws = stats.bootstrap_speedup_draws(samples["baseline"], samples["solution"], run.options.bootstrap_draws, seed=index)
    # The candidate's own shift, if it was measured in this very worker (not in the fresh one
    # of a hardened re-measurement); otherwise the interval takes the spread between processes.
    factor, shift_draws = run.corrections.get(index, (None, None)) if candidate is run.calibrated_worker else (None, None)
    if shift_draws is not None:
        draws = stats.with_process_shift(draws, shift_draws)
    elif on_gpu:
        draws = stats.with_between_process_spread(draws, b_med)
    run.speedup_draws.append(draws)
    return ShapeTiming(
        shape=shape,
        baseline_median_ns=b_med,
        solution_median_ns=s_med,
        speedup=b_med / max(s_med, 1e-9) * (factor or 1.0),
        speedup_ci95=stats.interval(draws),
        baseline_samples_ns=samples["baseline"],
        solution_samples_ns=samples["solution"],
        roofline_floor_ns=run.floor_ns(shape, spec),
        launch_cover_ns=cover_ns or None,
        solution_launch_ns=launch_ns["solution"] if on_gpu else None,
        process_correction=factor,
    )


def time_all(run: Grading, candidate: WorkerProcess) -> list[ShapeTiming]:
    """Every timed shape of the task, in order, against this grading's baseline worker."""
    _, spec = machine() if run.on_gpu else (None, None)
    with run.baseline_worker() as baseline:
        timings = []
        shapes = run.task.timed_shapes
        for index, shape in enumerate(shapes):
            run.progress(0.5 + 0.45 * index / len(shapes), f"timing shape {shape} ({index + 1} of {len(shapes)})")
            timings.append(time_shape(run, baseline, candidate, shape, index, spec))
        return timings


def time_with_ceiling(run: Grading, candidate: WorkerProcess) -> None:
    """Time; a speedup above the task's ceiling is measured again, hardened, before any credit.

    The lower of the two measurements is credited. One that does not reproduce is flagged, not
    judged: a solution that games the first measurement gains nothing from it, while noise
    (gradings under load once turned an honest 1472x into 264x) never makes an honest
    solution a cheat.
    """
    run.timings = time_all(run, candidate)
    first = stats.geometric_mean([t.speedup for t in run.timings])
    ceiling = run.task.speedup_ceiling
    if first <= ceiling:
        return
    run.flags.append(f"above_ceiling: {first:.2f}x exceeds the task's {ceiling:g}x; re-measured")
    first_timings, first_draws = run.timings, run.speedup_draws
    run.secret_seed = secrets.randbits(32)
    run.speedup_draws = []
    hardened = run.options.model_copy(
        update={"inputs_per_shape": 4 * run.options.inputs_per_shape, "time_budget_s": 2 * run.options.time_budget_s}
    )
    saved, run.options = run.options, hardened
    try:
        with run.worker(run.solution, run.candidate_cache()) as fresh:
            run.timings = time_all(run, fresh)
    finally:
        run.options = saved
    second = stats.geometric_mean([t.speedup for t in run.timings])
    if second > first:
        run.timings, run.speedup_draws = first_timings, first_draws
    if min(first, second) < REPRODUCE_FRACTION * max(first, second):
        run.flags.append(
            f"irreproducible_speedup: {first:.2f}x, then {second:.2f}x in a hardened re-measurement; "
            f"the lower is credited"
        )
