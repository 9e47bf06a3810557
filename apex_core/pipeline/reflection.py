"""What the agent is told before its next iteration: the grader's typed verdict of its last
solution, turned into what to fix, plus where the best one so far stands.

Built only from the grading (which the agent cannot influence), never from what the agent said.
The text names what failed and where: the compiler's error, the shape and element where the
output went wrong and by how much, the per-shape timings against the baseline and the roofline
floor, the grader's flags.
"""

from __future__ import annotations

from apex_core.grader.result import GradeResult

ESCALATION = (
    "",
    "Try a different approach, not a small variation: another tiling, fewer passes over memory, fused steps.",
    "Think like an expert: what bounds this kernel (bandwidth, latency, launches)? Aim at that bound directly.",
)


def _shape(shape: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def _verdict(result: GradeResult) -> list[str]:
    outcome = result.outcome.value
    lines = [f"Your last solution: {outcome}."]
    if outcome in ("compile_error", "runtime_error", "crash", "timeout", "tampering"):
        lines.append(f"The grader said: {result.reason[:1000]}")
    elif outcome == "wrong_answer":
        failed = [c for c in result.checks if not c.passed]
        for check in failed[:3]:
            where = f" at index {check.max_error_index}" if check.max_error_index else ""
            error = f"max abs error {check.max_abs_error:.3g}{where}" if check.max_abs_error is not None else check.message
            lines.append(f"- wrong on {'a hidden' if check.hidden else 'the'} shape {_shape(check.shape)} (seed {check.seed}): {error}")
        if result.reason:
            lines.append(f"The grader said: {result.reason[:500]}")
    elif outcome == "ok":
        credited = f"{result.speedup:.3f}x" if result.speedup is not None else "not timed"
        low_high = f" (95% interval {result.speedup_ci95[0]:.3f}-{result.speedup_ci95[1]:.3f}x)" if result.speedup_ci95 else ""
        lines.append(f"Correct on every shape; credited speedup {credited}{low_high}, score {result.score.total:.0f}.")
        for timing in result.timings:
            floor = f", roofline floor {timing.roofline_floor_ns / 1e3:.1f} us" if timing.roofline_floor_ns else ""
            lines.append(f"- {_shape(timing.shape)}: baseline {timing.baseline_median_ns / 1e3:.1f} us, yours "
                         f"{timing.solution_median_ns / 1e3:.1f} us ({timing.speedup:.2f}x{floor})")
    if result.flags:
        lines.append(f"Grader flags: {', '.join(result.flags)}.")
    return lines


def reflect(last: GradeResult | None, iteration: int, best: tuple[int, GradeResult] | None) -> str:
    """The feedback section for ``iteration`` (1-based): empty for the first."""
    parts: list[str] = []
    if last is not None:
        parts.extend(_verdict(last))
    if best is not None and last is not None and best[1] is not last:
        index, result = best
        parts.append(f"Your best so far is iteration {index}: {result.outcome.value}, score {result.score.total:.0f}"
                     + (f", {result.speedup:.3f}x" if result.speedup is not None else "") + "; beat it or keep its ideas.")
    hint = ESCALATION[min(iteration - 1, len(ESCALATION) - 1)]
    if hint and last is not None:
        parts.append(hint)
    return "\n".join(parts)
