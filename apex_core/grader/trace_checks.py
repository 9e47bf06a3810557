"""Verdicts from a profiler trace of one call: did the solution's own kernels do the work, on the
stream the timer watches?

A trace is what a worker's ``profile`` op returns: the device kernels of one call as
(name, device microseconds, stream id) and the names of the kernels the solution defines (Triton
JIT functions, or ``__global__`` functions of a HIP/CUDA source). The stream id is the profiler's
resource id for device events (7 for the default stream on the H200 we checked).
"""

from __future__ import annotations

from typing import Any

OWN_KERNEL_SHARE = 0.5
"""Fraction of a call's device time (copies and memsets aside) the solution's own kernels must take."""


def work(trace: dict[str, Any]) -> list[tuple[str, float, int]]:
    """Kernels of a trace, copies and memsets aside: (name, device microseconds, stream)."""
    kernels = [(str(k[0]), float(k[1]), int(k[2])) for k in trace.get("kernels", []) if len(k) == 3]
    return [k for k in kernels if not k[0].lower().startswith(("memset", "memcpy"))]


def side_stream_reason(baseline: dict[str, Any], solution: dict[str, Any]) -> str:
    """Why the solution's kernels ran outside the timed stream ('' when they did not)."""
    timed = {stream for _, _, stream in work(baseline)}
    outside = [(name, stream) for name, _, stream in work(solution) if timed and stream not in timed]
    if not outside:
        return ""
    name, stream = outside[0]
    return (
        f"{len(outside)} kernel(s) ran on stream {stream}, not the timed stream ({name[:60]}): work on a side "
        "stream escapes the timer"
    )


def own_work_reason(solution: dict[str, Any]) -> str:
    """Why the solution's own kernels did not do the work ('' when they did)."""
    own = [str(n) for n in solution.get("own_kernels", [])]
    time_by_name: dict[str, float] = {}
    for name, us, _ in work(solution):
        time_by_name[name] = time_by_name.get(name, 0.0) + us
    total = sum(time_by_name.values())
    mine = sum(us for name, us in time_by_name.items() if any(kernel in name for kernel in own))
    others = sorted((n for n in time_by_name if not any(k in n for k in own)), key=lambda n: -time_by_name[n])[:3]
    if not own:
        return "the solution defines no GPU kernel of its own"
    if mine <= 0:
        return f"none of the solution's kernels ({', '.join(own)}) ran; the device ran {others}"
    if total > 0 and mine / total < OWN_KERNEL_SHARE:
        return f"the solution's kernels did {100 * mine / total:.0f}% of the device time; the rest was {others}"
    return ""
