"""The correctness stage: every test shape and, unless turned off, every hidden shape, on several
seeds each, the reference computed by the judge and the outputs compared by the judge.

Seeds mix the public seed with the grading's secret one (``grading.case_seed``); hidden shapes
also hand the solution row-strided views of some inputs; digests of the inputs as drawn catch a
call that modifies them. The first failing case ends the stage.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from apex_core.grader.isolation import digest, protocol
from apex_core.grader.compare import Comparison, as_float64, compare_all, dtype_name
from apex_core.grader.grading import Grading, GradingFailed, case_seed, payload_limit
from apex_core.grader.isolation.payload import decode_values
from apex_core.grader.isolation.process import WorkerProcess
from apex_core.grader.result import Outcome, ShapeCheck
from apex_core.tasks.schema import Shape

SIGNAL_FACTOR = 10.0
"""A reference output must exceed the absolute tolerance this many times somewhere."""


def check(run: Grading, worker: WorkerProcess) -> tuple[Outcome, str] | None:
    """Run every case; the first failure ends the check and is returned."""
    task = run.task
    hidden_shapes = task.hidden_shapes if run.options.hidden_shapes else []
    cases = [(s, False) for s in task.test_shapes] + [(s, True) for s in hidden_shapes]
    seeds = run.options.seeds_per_shape
    for index, (shape, hidden) in enumerate(cases):
        for k in range(seeds):
            # Per seed: one case in Triton's interpreter can take many seconds.
            run.progress(0.1 + 0.4 * (index * seeds + k) / (len(cases) * seeds),
                         f"checking correctness, case {index + 1} of {len(cases)}" + (f", seed {k + 1} of {seeds}" if seeds > 1 else ""))
            seed = case_seed(run.options.public_seed, run.secret_seed, index, k)
            outcome, comparison = _check_case(run, worker, shape, seed, task.strided_args if hidden else ())
            run.checks.append(
                ShapeCheck(
                    shape={} if hidden else shape,  # hidden shapes stay hidden from the agent
                    seed=seed,
                    hidden=hidden,
                    passed=outcome is None,
                    max_abs_error=comparison.max_abs_error,
                    max_error_index=None if hidden else comparison.max_error_index,
                    message=comparison.message,
                )
            )
            if outcome is not None:
                where = "hidden shape" if hidden else f"shape {shape}"
                return outcome, f"{where}, seed {seed}: {comparison.message}"
    return None


def _check_signal(run: Grading, expected: list[Any], shape: Shape) -> None:
    """A reference output of tolerance size would let zeros pass: that is the task's fault.

    Exact (integer) outputs are checked bit for bit and need no signal.
    """
    for position, output in enumerate(expected):
        tolerance = run.task.tolerance_for(dtype_name(output))
        if tolerance.atol == 0 and tolerance.rtol == 0:
            continue
        magnitude = _largest_finite_magnitude(output)
        if magnitude <= SIGNAL_FACTOR * max(tolerance.atol, 1e-30):
            which = f"output {position} " if len(expected) > 1 else "output "
            raise GradingFailed(
                Outcome.infra_error,
                f"the task's reference {which}at shape {shape} is at most {magnitude:.3g}, within {SIGNAL_FACTOR:g}x "
                f"of atol={tolerance.atol:g}: the task needs inputs with more signal",
            )


def _largest_finite_magnitude(value: Any) -> float:
    if hasattr(value, "detach"):
        import torch

        finite = value.detach().to(torch.float64)
        finite = finite[torch.isfinite(finite)]
        return float(finite.abs().max()) if finite.numel() else 0.0
    values = as_float64(value)
    return float(np.max(np.abs(values[np.isfinite(values)]), initial=0.0))


def _check_case(
    run: Grading, worker: WorkerProcess, shape: Shape, seed: int, strided: tuple[int, ...] = ()
) -> tuple[Outcome | None, Comparison]:
    """One call at ``shape`` on the inputs of ``seed``; ``strided``: arguments the worker passes
    as row-strided views (same values, so the reference is computed on contiguous ones)."""
    library = run.task.array_library
    digest_key = secrets.randbits(62)
    # The worker calls while the judge computes the reference.
    pending = worker.submit(protocol.Call(shape=shape, seed=seed, strided=tuple(strided), digest_key=digest_key))
    args = run.inputs(shape, seed)
    # Before the reference runs: the inputs as drawn, whatever the reference does with them.
    digests = digest.input_digests(args, digest_key, skip=run.task.output_args)
    expected = run.expected(args)
    reply, payload = worker.collect(pending, payload_limit(expected))
    _check_signal(run, expected, shape)
    if not reply.get("ok"):
        return Outcome.runtime_error, Comparison(passed=False, message=str(reply.get("message", "the call raised")))
    if reply.get("output_type") != "exact":
        wanted = "torch.Tensor" if library == "torch" else "numpy.ndarray"
        message = f"returned {reply.get('output_type')}, expected exactly {wanted} or a tuple of them"
        return Outcome.wrong_answer, Comparison(passed=False, message=message)
    try:
        outputs = decode_values(payload, library)
    except Exception:  # whatever the bytes were, they were not plain arrays
        return Outcome.wrong_answer, Comparison(passed=False, message="the output could not be decoded as plain arrays")
    devices = {str(d).split(":")[0] for d in reply.get("output_devices", [])}
    if library == "torch" and devices != {run.device.split(":")[0]}:
        message = f"output on {', '.join(sorted(devices)) or 'no device'}, expected on {run.device}"
        return Outcome.wrong_answer, Comparison(passed=False, message=message)
    comparison = compare_all(outputs, expected, run.task)
    if not comparison.passed:
        return Outcome.wrong_answer, comparison
    if reply.get("input_digests") != digests:
        return Outcome.wrong_answer, comparison.model_copy(update={"passed": False, "message": "the call modified its inputs"})
    return None, comparison
