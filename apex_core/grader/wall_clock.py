"""The host's wall clock against the timer's events: device work the events did not see.

CUDA/HIP events time the stream they are recorded on. Work a solution leaves running elsewhere (a
side stream it never joins, a kernel a thread launches) can finish after the end event, so the
events under-report. A few extra calls, under the same launch cover as the timed samples, measure
on the host: the moment the end event has completed, then the end of a device-wide
synchronization. Once the end event has completed, everything the call put on the timed stream is
done, so an honest call leaves the device idle and the wait is only the synchronization's own
latency; a longer wait is work the events missed. This is the second line behind the profiler's
stream check, and it needs no trace: it also sees work a profiler would attribute to the timed
stream by mistake. (Why from the end event and under the cover, not from the call's return:
docs/grader.md, 'Measured reasons'.)
"""

from __future__ import annotations

import statistics

SLACK_NS = 50_000
"""Synchronization latency and scheduling noise an honest call may show (50 us)."""
SLACK_FRACTION = 0.5
"""Beyond SLACK_NS, the unseen time must also exceed this fraction of the event time to count."""


def unseen_work_reason(event_ns: list[int], after_end_ns: list[int], control_after_end_ns: list[int] | None = None) -> str:
    """Why the device was busy well past what the events timed ('' when it was not).

    ``event_ns``: the events' time of each check call; ``after_end_ns``: host time from the end
    event's completion to the end of a device-wide synchronization, for the same calls;
    ``control_after_end_ns``: the same wait measured on the baseline just before. Only the
    solution's wait beyond the baseline's counts: a busy host or driver (another process creating a
    device context on the same GPU) slows both alike (docs/grader.md, 'Measured reasons').
    """
    if not event_ns or len(event_ns) != len(after_end_ns):
        return ""
    event, waited = statistics.median(event_ns), statistics.median(after_end_ns)
    control = statistics.median(control_after_end_ns) if control_after_end_ns else 0.0
    unseen = waited - control
    if unseen <= max(SLACK_NS, SLACK_FRACTION * event):
        return ""
    return (
        f"the device stayed busy {unseen / 1e3:.0f} us after the timed events ended (events {event / 1e3:.1f} us): "
        "work outside the timed stream escapes the timer"
    )
