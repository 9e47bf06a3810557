"""The score formula: the one place that defines it.

score = 20·compiled + 100·correct + speedup_score(S), with S = baseline_time / solution_time and
speedup points only for solutions that compiled and are correct. The normalized kernel score
divides by 420 (compiled + correct + a 2× speedup) and is capped at 1; the model-level reward mixes
it with the end-to-end kernel gain (the winners over the task baselines at the same patch points). Every grader, report, leaderboard and reward in Apex calls
these functions, so the numbers cannot drift apart the way the reference system's did.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

COMPILED_POINTS = 20.0
CORRECT_POINTS = 100.0
REFERENCE_MAX_SCORE = 420.0
"""compiled (20) + correct (100) + the speedup points of a 2× kernel (300)."""

INTEGRATION_THRESHOLD = 1.05
"""Kernels at or above this speedup are hot-patched into the inference stack."""

KERNEL_WEIGHT = 0.7
THROUGHPUT_WEIGHT = 0.3


def _check_speedup(speedup: float) -> None:
    if not math.isfinite(speedup) or speedup < 0:
        raise ValueError(f"speedup must be a finite number >= 0, got {speedup!r}")


def speedup_score(speedup: float) -> float:
    """Points for a speedup S: 100 + 200·(S − 1) at S ≥ 1, else max(0, 100·S − 50)."""
    _check_speedup(speedup)
    if speedup >= 1.0:
        return 100.0 + 200.0 * (speedup - 1.0)
    return max(0.0, 100.0 * speedup - 50.0)


class ScoreBreakdown(BaseModel):
    """Each term of the kernel score, so reports can show where the points came from."""

    compiled_points: float = Field(ge=0)
    correct_points: float = Field(ge=0)
    speedup_points: float = Field(ge=0)
    total: float = Field(ge=0)
    normalized: float = Field(ge=0, le=1)


def kernel_score(compiled: bool, correct: bool, speedup: float | None, tampering: bool = False) -> ScoreBreakdown:
    """Score one kernel. ``speedup`` is ignored unless the solution compiled and is correct.

    A tampering verdict scores 0 whatever else was true: a solution caught cheating keeps none of
    the points its compile, its outputs or its timing would have earned, so cheating never pays
    more than trying honestly and failing.
    """
    if tampering:
        return ScoreBreakdown(compiled_points=0.0, correct_points=0.0, speedup_points=0.0, total=0.0, normalized=0.0)
    compiled_points = COMPILED_POINTS if compiled else 0.0
    correct_points = CORRECT_POINTS if correct else 0.0
    speedup_points = 0.0
    if compiled and correct and speedup is not None:
        speedup_points = speedup_score(speedup)
    total = compiled_points + correct_points + speedup_points
    return ScoreBreakdown(
        compiled_points=compiled_points,
        correct_points=correct_points,
        speedup_points=speedup_points,
        total=total,
        normalized=normalized_score(total),
    )


def normalized_score(score: float) -> float:
    """min(score / 420, 1)."""
    if not math.isfinite(score) or score < 0:
        raise ValueError(f"score must be a finite number >= 0, got {score!r}")
    return min(score / REFERENCE_MAX_SCORE, 1.0)


THROUGHPUT_TERM_RANGE = (-0.5, 1.0)
"""The throughput term (kernel gain - 1) is clipped to this range: a model at most twice as fast or
half as fast counts. No kernel swap inside one model earns more end to end (each is bounded by its
share of device time, ``apex_core.pipeline.stages.final.credit``), so a figure beyond it is a broken
or forged measurement, and one of them must not dominate a batch of rewards."""


def throughput_term(kernel_gain: float) -> float:
    """kernel gain - 1, clipped to ``THROUGHPUT_TERM_RANGE``."""
    if not (math.isfinite(kernel_gain) and kernel_gain >= 0):
        raise ValueError(f"kernel gain must be a finite number >= 0, got {kernel_gain!r}")
    low, high = THROUGHPUT_TERM_RANGE
    return min(max(kernel_gain - 1.0, low), high)


def model_reward(normalized_kernel_score: float, kernel_gain: float | None) -> float:
    """0.7 · normalized kernel score + 0.3 · clip(kernel gain − 1, −0.5, 1.0).

    The kernel gain is the final benchmark's candidate over control (the winners against the task
    baselines at the same patch points), never a gain the patch adapters make by themselves. None
    (the gain was implausible, the tokens diverged, nothing bounds it, or its interval holds 1.0)
    credits no throughput: the term is 0. A significantly slower model after patching lowers the reward, which is what an RL signal for
    integration should do; the range is [-0.15, 1.0].
    """
    if not 0.0 <= normalized_kernel_score <= 1.0:
        raise ValueError(f"normalized kernel score must lie in [0, 1], got {normalized_kernel_score!r}")
    term = 0.0 if kernel_gain is None else throughput_term(kernel_gain)
    return KERNEL_WEIGHT * normalized_kernel_score + THROUGHPUT_WEIGHT * term


# --- the RL reward ---------------------------------------------------------------------------------

RL_REWARD_FOR_OUTCOME: dict[str, float] = {
    "compile_error": -1.0,
    "timeout": -0.8,
    "crash": -0.8,
    "runtime_error": -0.8,
    "wrong_answer": -0.5,
}
"""Fixed rewards for honest failures."""

RL_CORRECT_BASE = 0.5
RL_SPEEDUP_WEIGHT = 0.5
RL_LOG2_CLIP = (-1.0, 3.0)
RL_TAMPERING = -1.5
"""Below every other outcome (the worst honest failure, a compile error, earns -1.0): a policy
must never learn that being caught cheating beats trying and failing."""


def rl_reward(outcome: str, correct: bool, speedup: float | None, own_work: bool = True) -> float | None:
    """A bounded reward for RL, beside the seed's unbounded score.

    Correct solutions earn 0.5 + 0.5·clip(log2 S, −1, 3): 0.5 at parity, 1.0 at 2×, 2.0 at 8× and
    beyond, 0.0 at half speed, so one lucky measurement cannot dominate a batch and a slowdown
    still beats any failure. Failures get fixed penalties (−0.5 wrong answer, −0.8 crash, timeout or
    runtime error, −1.0 compile error); tampering earns −1.5, below all of them, whether or not its
    outputs were right. Infrastructure errors return None: the sample says nothing about the policy and
    must be dropped, not rewarded. A correct answer whose work was not done by the solution's own
    kernel (``own_work=False``: a library call, a ghost kernel) earns 0.0. The range is [−1.5, 2].
    """
    if outcome == "infra_error":
        return None
    if outcome == "tampering":
        return RL_TAMPERING
    if outcome != "ok" or not correct:
        return RL_REWARD_FOR_OUTCOME.get(outcome, RL_REWARD_FOR_OUTCOME["wrong_answer"])
    if not own_work:
        return 0.0
    if speedup is None:
        return RL_CORRECT_BASE
    _check_speedup(speedup)
    low, high = RL_LOG2_CLIP
    log_speedup = math.log2(speedup) if speedup > 0 else low
    return RL_CORRECT_BASE + RL_SPEEDUP_WEIGHT * min(max(log_speedup, low), high)
