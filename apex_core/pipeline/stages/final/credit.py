"""What the final benchmark credits: gains between arms, each kernel's leave-one-out share, and
the Amdahl bound that no credited gain may exceed.

Why three arms and not two: the patch points change more than the kernel. On the H200 the task
*baselines* patched in made Llama 19% faster through the adapters alone (one GEMM on fused gate/up
weights, other launches and layouts), and that gain was credited to the agent (issue 27). So the
arms are the original stack, the *control* (every patch point of the integrated kernels with the
task's baseline behind it) and the *candidate* (the same points with the winners). Integration
gain = control / original is the adapters' doing, reported and never rewarded; kernel gain =
candidate / control is the agent's. With several winners, the candidate with kernel k put back
to its baseline (leave-one-out) gives k's own share: candidate / without-k.

Each gain is the median of per-round ratios of two arms stepped back to back in one session, with
the 95% interval of ``ratio_interval`` (distribution-free from 6 rounds, t on log ratios below).

The bound: a kernel that took share s of the device time can make the model at most 1 / (1 - s)
times faster, and only by vanishing. Shares are measured once, on the original stack, by the
identify stage; a gain is measured against another arm (the control, or the candidate without
the kernel), in which the kernel's baseline takes the same time but the rest may be faster: there
its share is s times that arm's speed over the original's (``share_in_arm``; cpu-mini's activation,
7.7% of the original, was 27% of an arm whose norm ran four times faster, and its credit 1.28x).
The bound is taken on that share with a margin (x 1.25 + 0.01, at most 0.95): a credited gain
wholly above it is not a kernel's doing (a forged timing, a changed workload, a broken
measurement), is flagged ``implausible_e2e``, and earns no throughput reward.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.grader import log_t_interval, median_interval, pairs_for_confidence

CONFIDENCE = 0.95
MIN_PAIRS = pairs_for_confidence(CONFIDENCE)
"""The fewest rounds whose distribution-free interval can be a 95% one (6): the default."""
SHARE_MARGIN_FACTOR = 1.25
SHARE_MARGIN_ADD = 0.01
MAX_BOUND_SHARE = 0.95
"""A share (with its margin) is capped here, so no bound is infinite: at most a 20x gain."""
IMPLAUSIBLE = "implausible_e2e"
IntervalMethod = Literal["order statistics", "t on log ratios"]


class Gain(BaseModel):
    """One arm over another: per-round ratios, their median and its 95% interval."""

    ratios: list[float]
    median: float
    interval: tuple[float, float]
    interval_method: IntervalMethod
    interval_confidence: float = Field(description="exact for order statistics (at least 0.95)")
    significant: bool = Field(description="the interval excludes 1.0")

    def describe(self) -> str:
        low, high = self.interval
        how = f"95% interval {low:.3f}-{high:.3f}x, {len(self.ratios)} rounds" + (
            ", t on log ratios" if self.interval_method == "t on log ratios" else "")
        return f"{self.median:.3f}x ({how}, {'significant' if self.significant else 'not significant: includes 1.0'})"


class KernelCredit(BaseModel):
    """One integrated kernel's share of the kernel gain and whether it is plausible."""

    task_id: str
    point: str | None = None
    share: float | None = Field(default=None, description="its profiled share of the original's device time (identify)")
    arm_share: float | None = Field(default=None, description="that share in the arm its gain is measured against "
                                                             "(share_in_arm), which the bound is taken on")
    bound: float | None = Field(default=None, description="the most its removal could gain end to end, with the margin")
    gain: Gain = Field(description="candidate / candidate-with-this-kernel-at-its-baseline (the kernel gain itself with one winner)")
    implausible: bool = Field(description=f"the credited gain exceeds its bound ({IMPLAUSIBLE})")


def ratio_interval(ratios: list[float]) -> tuple[float, float, float, IntervalMethod]:
    """The rounds' 95% interval, its confidence and how it was made: order statistics where they
    reach 95%, else t on the log ratios."""
    low, high, confidence = median_interval(ratios, CONFIDENCE)
    if confidence >= CONFIDENCE:
        return low, high, confidence, "order statistics"
    low, high = log_t_interval(ratios)
    return low, high, CONFIDENCE, "t on log ratios"


def gain(numerators: list[float], denominators: list[float]) -> Gain:
    """Per-round tokens/s of one arm over another's, summarized."""
    ratios = [a / b for a, b in zip(numerators, denominators)]
    low, high, confidence, method = ratio_interval(ratios)
    return Gain(ratios=ratios, median=statistics.median(ratios), interval=(low, high), interval_method=method,
                interval_confidence=confidence, significant=low > 1.0 or high < 1.0)


def share_in_arm(share: float | None, arm_over_original: Gain) -> float | None:
    """A kernel's share of an arm's time where its baseline runs as in the original and the rest of
    the arm runs ``arm_over_original`` times as fast: ``share`` times that speed (the interval's top,
    so the bound errs generous), at most 1."""
    if share is None or not math.isfinite(share) or share < 0:
        return None
    return min(1.0, share * max(1.0, arm_over_original.interval[1]))


def amdahl_bound(share: float | None) -> float | None:
    """The most end-to-end gain a kernel of this device-time share could earn (with the margin)."""
    if share is None or not math.isfinite(share) or share < 0:
        return None
    return 1.0 / (1.0 - min(MAX_BOUND_SHARE, share * SHARE_MARGIN_FACTOR + SHARE_MARGIN_ADD))


def beyond(measured: Gain, bound: float | None) -> bool:
    """Whether a gain is more than its bound allows: its whole 95% interval above the bound. The
    median alone would flag honest kernels of small share whose leave-one-out ratio is noisy (a
    1.08x bound, a 1.2x median from rounds of 0.9-1.5x), and a forged or broken figure lies far
    beyond anyway (13,000x at 71998bb)."""
    return bound is not None and measured.interval[0] > bound


def prefix_agreement(produced: list[list[int]], trusted: list[list[int]]) -> float | None:
    """The mean fraction of each sequence's generated tokens that match a trusted arm's up to the
    first difference: 1.0 for identical generations, near 0 for tokens that were never computed.

    Numerics differ between kernels, so a greedy token can flip at a near-tie and the sequences
    part from there; an honest candidate keeps long common prefixes, a worker that skips the work
    cannot produce them."""
    if not produced or not trusted or len(produced) != len(trusted):
        return None
    fractions = []
    for ours, theirs in zip(produced, trusted):
        if not theirs:
            return None
        same = 0
        for a, b in zip(ours, theirs):
            if a != b:
                break
            same += 1
        fractions.append(same / len(theirs))
    return statistics.fmean(fractions)
