"""The host's wall clock against the timer's events: device work the events did not see.

CUDA/HIP events time the stream they are recorded on. Work a solution leaves running elsewhere (a
side stream it never joins, a kernel a thread launches) finishes after the end event, so the
events under-report. A few extra calls measure, on the host: the moment the call returns, then a
device-wide synchronization. For an honest call the device needs at most the timed call's own
time after the return (it started while the host was still launching); time beyond that is work
the events missed. This is the second line behind the profiler's stream check, and it needs no
trace: it also sees work a profiler would attribute to the timed stream by mistake.
"""

from __future__ import annotations

import statistics

SLACK_NS = 50_000
"""Synchronization latency and scheduling noise an honest call may show (50 us)."""
SLACK_FRACTION = 0.5
"""Beyond SLACK_NS, the unseen tail must also exceed this fraction of the event time to count."""


def unseen_work_reason(event_ns: list[int], tail_ns: list[int]) -> str:
    """Why the device was busy well past what the events timed ('' when it was not).

    ``event_ns``: the events' time of each check call; ``tail_ns``: host time from the call's return
    to the end of a device-wide synchronization, for the same calls.
    """
    if not event_ns or len(event_ns) != len(tail_ns):
        return ""
    event, tail = statistics.median(event_ns), statistics.median(tail_ns)
    unseen = tail - event
    if unseen <= max(SLACK_NS, SLACK_FRACTION * event):
        return ""
    return (
        f"the device stayed busy {unseen / 1e3:.0f} us after the timed events ended (events {event / 1e3:.1f} us, "
        f"host wait after the call {tail / 1e3:.1f} us): work outside the timed stream escapes the timer"
    )
