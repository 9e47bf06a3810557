"""``apex benchmark-final``: the workload with its original stack, with the task baselines at the
winners' patch points (control), and with the winners (candidate), interleaved in one session, and
only what the kernels earned credited (``credit.py`` says why three arms; ``rounds.py`` measures).

Why interleaved: on the H200 two processes of the same hour differed by 30% on one eager workload
(docs/benchmarks.md, "Workloads"), so a figure compared with one stored from another process
measures the machine as much as the patch.

Checks that no worker can talk its way past: every patched arm's greedy tokens of every round are
audited by the original arm, which runs no patched code (``apex_core.workloads.audit``: fed the
arm's own sequence, the unpatched model must rank each token within a near-tie of its top choice; a
worker that skips the work cannot produce such tokens), and every credited gain is held to its
Amdahl bound. The candidate's common prefix with the control's tokens is reported beside it, not
judged: in bf16 with random weights correct kernels part at near-ties within a few tokens.

The model reward (``apex_core.score.model_reward``) takes the winners' kernel scores from their
gradings and, for its throughput term, the kernel gain only, clipped to the documented range, and
nothing at all when a gain is implausible, the tokens diverge, no profiled share bounds it, or its
interval holds 1.0.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import statistics
from pathlib import Path

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.patcher.hold import ArmPatch
from apex_core.pipeline.stages.final.arms import CANDIDATE, CONTROL, ORIGINAL, WITHOUT
from apex_core.pipeline.stages.final.credit import (
    IMPLAUSIBLE,
    MIN_PAIRS,
    Gain,
    KernelCredit,
    amdahl_bound,
    beyond,
    gain,
    ratio_interval,
    share_in_arm,
)
from apex_core.pipeline.stages.final.rounds import Rounds, measure_rounds
from apex_core.progress import Progress, reporter
from apex_core.score import model_reward, throughput_term
from apex_core.workloads.spec import WorkloadSpec

__all__ = ["FINAL_FILE", "MIN_PAIRS", "FinalBenchmark", "as_first_benchmarked", "benchmark_final", "credit_rounds", "ratio_interval"]

FINAL_FILE = "final.json"
DRIFT_THRESHOLD = 0.05
AUDIT_FLOOR = 0.99
"""The least fraction of a patched arm's tokens, in every round, that the audit must find within a
near-tie of the unpatched model's choice, or its timing is not credited (``tokens_diverge``). A
correct kernel is expected at 1.0: a token beyond a near-tie is what the accuracy gate fails a patch
for. The 1% allowance is for a rare outlier over the many positions a benchmark sees, and is worth
at most 1% of decode to a worker that forged tokens."""
TOKENS_DIVERGE = "tokens_diverge"


class FinalBenchmark(BaseModel):
    run_id: str
    workload: WorkloadSpec
    patches: list[ArmPatch] = Field(description="the winners measured (the candidate arm)")
    control: list[ArmPatch] = Field(description="each winner's task baseline at the same point (the control arm)")
    excluded: list[dict[str, str]] = Field(default_factory=list,
                                           description="winners left out: the smoke round found the model badly slow with them")
    runs: int = Field(description="rounds: each arm stepped once per round")
    tokens_per_s: dict[str, list[float]] = Field(description="per arm, per round, by this process's clock")
    integration_gain: Gain = Field(description="control / original: what the adapters do by themselves (never credited)")
    kernel_gain: Gain = Field(description="candidate / control: what the winning kernels earned")
    credits: list[KernelCredit] = Field(description="each winner's share of the kernel gain (leave-one-out) and bound")
    bound: float | None = Field(description="the Amdahl bound of all winners together (None: no profiled share)")
    token_agreement: float | None = Field(description="median over rounds of the candidate's common-prefix fraction with the control's "
                                                      "tokens (reported, not judged)")
    token_audit: dict[str, float] = Field(default_factory=dict, description=(
        "per patched arm, the least over rounds of the fraction of its tokens within a near-tie of the unpatched "
        f"model's choice (under {AUDIT_FLOOR} flags {TOKENS_DIVERGE}); empty: the workload answers no tokens"))
    flags: list[str] = Field(default_factory=list, description=f"{IMPLAUSIBLE}, {TOKENS_DIVERGE}: why the throughput is not credited")
    credited: bool = Field(description="the kernel gain counts in the model reward: no flag, and a profiled share bounds it")
    original_cv: float | None = Field(description="coefficient of variation of the original arm's tokens/s over the rounds")
    drift: float = Field(description="original tokens/s after the rounds over before, minus 1")
    drift_flagged: bool
    graph_fallbacks: dict[str, str] = Field(default_factory=dict, description="arms whose decode fell back to eager, and why")
    confined: bool = Field(description="the workers ran confined (False only with --unconfined, as asked)")
    verdict: str
    kernel_score: float | None = Field(description="mean normalized kernel score of the winners, from their gradings")
    throughput_term: float = Field(description="the kernel gain's term of the model reward: clip(kernel gain - 1), 0 when not credited or not significant")
    model_reward: float | None = Field(description="0.7 x kernel_score + 0.3 x throughput_term; None without gradings")
    reward_note: str
    results_dir: str
    created_at: str


def as_first_benchmarked(workload_id: str, results_root: Path, runs: int | None) -> tuple[WorkloadSpec, int]:
    """The workload as the last ``apex benchmark`` or ``apex profile`` of it resolved it, whichever is
    newer (else the catalogue's), and the number of rounds: ``runs`` if given, else that benchmark's
    run count, else 5, and at least ``MIN_PAIRS`` (the fewest that can give a 95% interval) unless
    ``runs`` says otherwise."""
    from apex_core.workloads import get_workload
    from apex_core.workloads.runner import DEFAULT_RUNS, last_measured

    spec = get_workload(workload_id)
    measured = last_measured(spec.id, results_root)
    benchmark = measured[1] if measured else None
    if measured:
        spec = measured[0]
    if runs is not None:
        return spec, runs
    return spec, max(len(benchmark.runs) if benchmark else DEFAULT_RUNS, MIN_PAIRS)


def workload_kernel_stacks(workload: str | None, results_root: Path) -> tuple[str, ...]:
    """The kernel stacks (``--kernels``) ``workload`` ran with in its last benchmark or profile under
    ``results_root`` (else the catalogue's): whose patch points its winners go to. None: ()."""
    return as_first_benchmarked(workload, results_root, None)[0].kernels if workload else ()


def benchmark_final(spec: WorkloadSpec, runs: int, results_root: Path, *, warmup: int = 2,
                    shares: dict[str, float] | None = None, unconfined: bool = False,
                    progress: Progress | None = None) -> FinalBenchmark:
    """Measure ``spec``'s three arms (and leave-one-out arms) for this environment's applied
    patches, restore, and credit what was measured. ``shares``: task id -> profiled device-time
    share of the original (``apex_core.pipeline.stages.identify.profiled_shares`` finds them); a winner
    without one has no bound, and the kernel gain is then reported but not credited."""
    if runs < 2:
        raise ApexUserError(f"--runs {runs}: the interval needs at least 2 rounds ({MIN_PAIRS} by default)")
    rounds = measure_rounds(spec, runs, results_root, warmup=warmup, unconfined=unconfined, progress=progress)
    result = credit_rounds(rounds, shares or {}, results_root)
    reporter(progress)(1.0, result.verdict)
    return result


def credit_rounds(rounds: Rounds, shares: dict[str, float], results_root: Path) -> FinalBenchmark:
    """The gains, each winner's credit and bound, the flags and the model reward of ``rounds``,
    written to ``<results_root>/<run id>/final.json``."""
    per_arm, winners = rounds.tokens_per_s, rounds.winners
    integration = gain(per_arm[CONTROL], per_arm[ORIGINAL])
    kernel = gain(per_arm[CANDIDATE], per_arm[CONTROL])
    credits = []
    for winner in winners:
        against = CONTROL if len(winners) == 1 else f"{WITHOUT}{winner.task_id}"
        measured = kernel if len(winners) == 1 else gain(per_arm[CANDIDATE], per_arm[against])
        share = shares.get(winner.task_id)
        arm_share = share_in_arm(share, gain(per_arm[against], per_arm[ORIGINAL]))
        bound = amdahl_bound(arm_share)
        credits.append(KernelCredit(task_id=winner.task_id, point=winner.point, share=share, arm_share=arm_share, bound=bound,
                                    gain=measured, implausible=beyond(measured, bound)))
    known = [shares[w.task_id] for w in winners if w.task_id in shares]
    total_bound = amdahl_bound(share_in_arm(sum(known), integration)) if len(known) == len(winners) else None
    agreement = statistics.median(rounds.agreements) if rounds.agreements else None
    flags = []
    if beyond(kernel, total_bound) or any(c.implausible for c in credits):
        flags.append(f"{IMPLAUSIBLE}: a credited gain exceeds what removing the kernels' profiled share of device time "
                     "could give (Amdahl, with a margin)")
    audit = {name: min(fractions) for name, fractions in rounds.audits.items() if fractions}
    failed = {name: fraction for name, fraction in audit.items() if fraction < AUDIT_FLOOR}
    if failed:
        flags.append(f"{TOKENS_DIVERGE}: " + ", ".join(f"{fraction:.1%} of the {name} arm's greedy tokens" for name, fraction in failed.items())
                     + f" (its worst round) are within a near-tie of the unpatched model's choice at their own context, under "
                     f"{AUDIT_FLOOR:.0%}: its timing is not of the model's work")
    originals = per_arm[ORIGINAL]
    cv = statistics.stdev(originals) / statistics.fmean(originals) if len(originals) > 1 else None
    drift = rounds.original_after / rounds.original_before - 1
    kernel_score, reward_note = integrated_kernel_score(winners)
    credited = not flags and total_bound is not None
    # A gain whose interval holds 1.0 is not told apart from noise: it earns no term either way, so
    # a policy cannot farm the noise of a model its kernel does not change.
    rewarded = kernel.median if credited and kernel.significant else None
    term = throughput_term(rewarded) if rewarded is not None else 0.0
    if kernel_score is None:
        reward = None
    else:
        reward = model_reward(kernel_score, rewarded)
        if not credited:
            reward_note += ("; throughput not credited: " + ("; ".join(f.split(":")[0] for f in flags) if flags else
                            "no profiled share bounds the gain (run apex profile and apex identify on this workload first)"))
        elif rewarded is None:
            reward_note += "; throughput term 0: the kernel gain's interval holds 1.0 (not significant)"
    verdict = (f"kernel gain {kernel.describe()}; integration gain (adapters with the baselines, not credited) "
               f"{integration.describe()}" + (f"; FLAGGED {', '.join(f.split(':')[0] for f in flags)}" if flags else ""))
    created = dt.datetime.now(dt.timezone.utc)
    spec = rounds.workload
    run_id = f"{created.strftime('%Y%m%d-%H%M%S')}-{spec.id}-final-{secrets.token_hex(3)}"
    folder = results_root / run_id
    result = FinalBenchmark(
        run_id=run_id, workload=spec, patches=winners, control=[rounds.baselines[w.task_id] for w in winners],
        excluded=rounds.excluded, runs=rounds.runs, tokens_per_s=per_arm, integration_gain=integration, kernel_gain=kernel,
        credits=credits, bound=total_bound, token_agreement=agreement, token_audit=audit, flags=flags, credited=credited, original_cv=cv,
        drift=drift, drift_flagged=abs(drift) > DRIFT_THRESHOLD, graph_fallbacks=rounds.graph_fallbacks,
        confined=rounds.confined, verdict=verdict, kernel_score=kernel_score, throughput_term=term, model_reward=reward,
        reward_note=reward_note, results_dir=str(folder), created_at=created.isoformat(),
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FINAL_FILE).write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return result


def integrated_kernel_score(patches: list[ArmPatch]) -> tuple[float | None, str]:
    """The mean normalized kernel score of the measured winners, each from the newest grading of
    exactly its file that this installation's judge signed (``gradings.verified_grading``), and a
    note on how it was found. A result file anywhere proves nothing by itself."""
    from apex_core.patcher.gradings import verified_grading

    scores, missing = [], []
    for patch in patches:
        grading = verified_grading(patch.task_id, Path(patch.solution))
        if grading is not None and grading.provenance.solution_hash == patch.sha256:
            scores.append(grading.score.normalized)
        else:
            missing.append(patch.task_id)
    if missing:
        return None, (f"no confined grading signed here of the patched file of {', '.join(missing)}: the model reward needs "
                      "every winner's kernel score (apex grade that exact file)")
    return statistics.fmean(scores), (f"0.7 x mean normalized kernel score of {len(scores)} winner(s) + 0.3 x "
                                      "clip(kernel gain - 1, -0.5, 1.0)")
