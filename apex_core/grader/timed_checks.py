"""Checks on what the timing measured, run right after a shape's timed rounds: the outputs of
timed calls, the host's wall clock against the timer's events, and a profiler trace of one call.

They catch what a correct answer in the correctness stage cannot: outputs cached or left stale
while timed, device work on a stream the timer does not watch, and a 'kernel' that is a library's
rather than the solution's own.
"""

from __future__ import annotations

import secrets
from typing import Any

from apex_core.grader import trace_checks, wall_clock
from apex_core.grader.isolation import protocol
from apex_core.grader.compare import compare_all
from apex_core.grader.grading import PAYLOAD_SLACK_BYTES, Grading, GradingFailed, payload_limit, require_ok
from apex_core.grader.isolation.payload import decode_values
from apex_core.grader.isolation.process import WorkerProcess
from apex_core.grader.result import Outcome
from apex_core.grader.isolation.rotation import CallRotation
from apex_core.grader.state import STATE
from apex_core.tasks.schema import Shape

WALL_CHECK_CALLS = 10
"""Calls per timed shape whose events are checked against the host's wall clock."""
WALL_CHECK_ATTEMPTS = 2
"""Measurements a wall-clock verdict must hold on before it counts."""
CHECKED_BUFFERS = 3
"""Call buffers whose last timed output is checked, picked at random after the timing."""
CHECKED_BYTES = 1024**3
"""Bytes of a shape's traffic (roofline) up to which all CHECKED_BUFFERS are checked; beyond it fewer."""


def check_timed_outputs(run: Grading, candidate: WorkerProcess, shape: Shape, rotation: CallRotation) -> None:
    """The last output of call buffers picked now, at random, must match the reference of the
    values they held (drawn from each call's own seed): a solution that returns stale or
    cached outputs cannot know which.

    Which values a buffer held comes from the judge's own copy of the rotation, never from the
    reply: a process that rewrote the worker's bookkeeping cannot steer the check to the one
    input set it answers right, or leave buffers out.
    """
    timed = sorted(rotation.last_timed)
    # Outputs cross a pipe: at a gigabyte per output set (an 8192 x 34816 GEMM), one buffer.
    checked = min(len(timed), CHECKED_BUFFERS, max(1, CHECKED_BYTES // max(run.call_bytes(shape), 1)))
    picked = sorted(secrets.SystemRandom().sample(timed, checked))
    held = [rotation.last_timed[slot] for slot in picked]
    references: dict[int, list[Any]] = {held[0]: run.expected(run.inputs(shape, held[0]))}
    per_call = len(references[held[0]])
    # The outputs of ``checked`` calls, each the size of the reference's outputs at this shape.
    limit = checked * (payload_limit(references[held[0]]) - PAYLOAD_SLACK_BYTES) + PAYLOAD_SLACK_BYTES
    reply, payload = candidate.request(protocol.TimedOutputs(slots=tuple(picked)), max_payload=limit)
    if reply.get("output_type") != "exact":
        raise GradingFailed(Outcome.wrong_answer, f"a timed call at shape {shape} returned {reply.get('output_type')}")
    try:
        values = decode_values(payload, run.task.array_library)
    except Exception:  # whatever the bytes were, they were not plain arrays
        raise GradingFailed(Outcome.wrong_answer, "the outputs of the timed calls could not be decoded") from None
    if len(values) != checked * per_call:
        raise GradingFailed(
            Outcome.wrong_answer,
            f"asked for the outputs of {checked} timed calls at shape {shape} ({per_call} each), got {len(values)} arrays",
        )
    for position, item in enumerate(held):
        outputs = values[position * per_call : (position + 1) * per_call]
        if item not in references:
            references[item] = run.expected(run.inputs(shape, item))
        comparison = compare_all(outputs, references[item], run.task)
        if not comparison.passed:
            raise GradingFailed(
                Outcome.wrong_answer,
                f"the output of a timed call at shape {shape} is wrong (stale or cached?): {comparison.message}",
            )


def check_wall_clock(run: Grading, baseline: WorkerProcess, candidate: WorkerProcess, shape: Shape, cover_ns: int) -> None:
    """The host's wall clock must not see device work that the timer's events missed.

    The baseline is measured the same way just before, as the control; a verdict must hold on
    a second measurement too, so that a moment of host or driver contention blames no one.
    """
    reason = ""
    for _ in range(WALL_CHECK_ATTEMPTS):
        request = protocol.WallCheck(request_key=secrets.randbits(62), calls=WALL_CHECK_CALLS, cover_ns=cover_ns)
        control, _ = baseline.request(request)
        require_ok(control, "baseline")
        reply, _ = candidate.request(request)
        require_ok(reply, "solution")
        reason = wall_clock.unseen_work_reason(
            [int(v) for v in reply.get("event_ns", [])],
            [int(v) for v in reply.get("after_end_ns", [])],
            [int(v) for v in control.get("after_end_ns", [])],
        )
        if not reason:
            return
    run.flags.append(f"unseen_device_work: {reason}")
    raise GradingFailed(Outcome.tampering, f"at shape {shape}: {reason}")


def check_trace(run: Grading, baseline: WorkerProcess, candidate: WorkerProcess) -> None:
    """Profile one call: the work must stay on the timed stream and be the solution's own.

    The baseline's trace (which stream the timer watches) is profiled once per task and device
    in this process and then reused.
    """
    task = run.task
    key = (task.id, task.content_hash(), run.device)
    if key not in STATE.baseline_traces:
        reply, _ = baseline.request(protocol.Profile(request_key=secrets.randbits(62)))
        require_ok(reply, "baseline")
        STATE.baseline_traces[key] = reply
    reply, _ = candidate.request(protocol.Profile(request_key=secrets.randbits(62)))
    require_ok(reply, "solution")
    if not task.allow_side_streams:
        reason = trace_checks.side_stream_reason(STATE.baseline_traces[key], reply)
        if reason:
            raise GradingFailed(Outcome.tampering, reason)
    if task.language in ("triton", "hip"):
        run.no_custom_kernel = trace_checks.own_work_reason(reply)
        if run.no_custom_kernel:
            run.flags.append(f"no_custom_kernel: {run.no_custom_kernel}")
