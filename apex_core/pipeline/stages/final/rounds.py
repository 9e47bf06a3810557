"""The final benchmark's measurement: every arm loaded in its own confined worker, then stepped in
rounds on shared request seeds. Nothing here credits anything (``benchmark.py`` does, from what this
returns), so one measurement can be credited under other profiled shares without running again.

How: one confined worker per arm (``arms.py``, ``worker.py``), each started while the environment
held its arm's patches; then the environment is restored and the arms are stepped in rounds, every
arm on the same freshly drawn request seed, in an order drawn afresh each round, timed by this
process's clock. Before the rounds, a smoke round: a candidate slower than half the control is
bisected to the winner that makes it so, which is left out (and reported). The original arm is
stepped once before and once after the rounds: the session's drift.

After each round, untimed, the original arm (no patched code) audits every other arm's greedy tokens
of that round (``apex_core.workloads.audit``: why this and not agreement between the arms): the
fraction of them within a near-tie of the unpatched model's own choice is kept per arm and round.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.patcher.accuracy_compare import thresholds_for
from apex_core.patcher.hold import ArmPatch, bound_patch, checked_when_applied, hold
from apex_core.patcher.patcher import restore, status
from apex_core.pipeline.stages.final.arms import CANDIDATE, CONTROL, ORIGINAL, Arm, BenchWorker, baseline_patch, plan_arms
from apex_core.pipeline.stages.final.credit import prefix_agreement
from apex_core.progress import Progress, reporter
from apex_core.workloads.audit import within_ties
from apex_core.workloads.spec import WorkloadSpec

SMOKE_FLOOR = 0.5
"""A candidate under half the control's speed is not measured: it is bisected and left out."""


class Rounds(BaseModel):
    """What the rounds measured, before any credit."""

    workload: WorkloadSpec
    winners: list[ArmPatch] = Field(description="the winners measured (the candidate arm)")
    baselines: dict[str, ArmPatch] = Field(description="task id -> its baseline at the winner's point (the control arm)")
    excluded: list[dict[str, str]] = Field(default_factory=list,
                                           description="winners left out: the smoke round found the model badly slow with them")
    tokens_per_s: dict[str, list[float]] = Field(description="per arm, per round, by this process's clock")
    agreements: list[float] = Field(description="per round, the candidate's common-prefix fraction with the control's tokens")
    audits: dict[str, list[float]] = Field(default_factory=dict, description=(
        "per arm but the original, per round: the fraction of its greedy tokens the unpatched model, fed the arm's "
        "own sequence, ranks within a near-tie of its top choice (none: the workload answers no tokens)"))
    original_before: float = Field(description="the original arm's tokens/s before the rounds")
    original_after: float = Field(description="the original arm's tokens/s after the rounds")
    graph_fallbacks: dict[str, str] = Field(default_factory=dict, description="arms whose decode fell back to eager, and why")
    confined: bool

    @property
    def runs(self) -> int:
        return len(self.tokens_per_s[ORIGINAL])


def measure_rounds(spec: WorkloadSpec, runs: int, results_root: Path, *, warmup: int = 2, unconfined: bool = False,
                   progress: Progress | None = None) -> Rounds:
    """Load every arm of this environment's applied patches and step them ``runs`` rounds; restore
    the environment whatever happens."""
    from apex_core.grader import require_confinement
    from apex_core.pipeline.stages.final.worker import patched_files

    report = reporter(progress)
    journal = status()
    applied = [p for p in (journal.active() if journal else []) if p.state == "applied"]
    if not applied:
        raise ApexUserError("nothing is patched in this environment: apply the winners first (apex patch apply or apex integrate)")
    require_confinement("run patched code in the final benchmark's workers", unconfined)
    winners = [bound_patch(p.task_id or "", Path(p.solution or ""), p.point) for p in applied]
    baselines = {w.task_id: baseline_patch(w) for w in winners}
    spec = spec.resolved()
    tokens = spec.batch * (spec.prompt_tokens + spec.decode_tokens)
    tie = thresholds_for(spec.dtype).tie
    # The candidate arm re-applies what was applied and checked: only the baselines are checked here.
    checked = checked_when_applied(applied, unconfined)
    workers: dict[str, BenchWorker] = {}

    def start(arm: Arm) -> BenchWorker:
        report(0.05, f"loading the {arm.name} arm ({len(arm.patches)} patch(es))")
        hold(arm.patches, results_root, checked, unconfined=unconfined)
        worker = BenchWorker(arm, spec, patched_files(spec.stack), unconfined=unconfined)
        workers[arm.name] = worker
        for _ in range(warmup):
            worker.step()
        return worker

    def stop(name: str) -> None:
        worker = workers.pop(name, None)
        if worker is not None:
            worker.close()

    excluded: list[dict[str, str]] = []
    try:
        # The original first, the environment restored once for it; each patched arm after it swaps
        # its set of patches for the last one's inside one patch session (``hold`` says why that is safe).
        start(Arm(name=ORIGINAL, patches=[]))
        while True:
            control, candidate = start(Arm(name=CONTROL, patches=[baselines[w.task_id] for w in winners])), \
                start(Arm(name=CANDIDATE, patches=winners))
            seed = secrets.randbelow(2**31)
            before_s, smoke_s = control.step(seed)[0], candidate.step(seed)[0]
            if smoke_s * SMOKE_FLOOR <= before_s:
                break
            if len(winners) == 1:
                raise ApexUserError(f"the patched model runs at {tokens / smoke_s:,.0f} tokens/s, under half the control's "
                                    f"{tokens / before_s:,.0f}: the patch of {winners[0].task_id} is badly slow inside the model; "
                                    "nothing was measured")
            stop(CANDIDATE)
            culprit = _find_the_slow_patch(winners, baselines, control, start, stop)
            excluded.append({"task_id": culprit.task_id, "solution": culprit.solution,
                             "reason": f"with every winner the model ran at {tokens / smoke_s:,.0f} tokens/s against the "
                                       f"control's {tokens / before_s:,.0f} (under half); bisection found this one"})
            winners = [w for w in winners if w != culprit]
            stop(CONTROL)
        for arm in plan_arms(winners, baselines):
            if arm.name not in workers:
                start(arm)
        restore()
        names = [arm.name for arm in plan_arms(winners, baselines)]
        original_before = tokens / workers[ORIGINAL].step()[0]
        per_arm: dict[str, list[float]] = {name: [] for name in names}
        agreements: list[float] = []
        audits: dict[str, list[float]] = {}
        for index in range(runs):
            report(0.3 + 0.65 * index / runs, f"round {index + 1}/{runs}")
            seed = secrets.randbelow(2**31)
            order = _round_order(names, seed)
            generated: dict[str, list[list[int]]] = {}
            for name in order:
                seconds, rows = workers[name].step(seed)
                per_arm[name].append(tokens / seconds)
                generated[name] = rows
            agreement = prefix_agreement(generated[CANDIDATE], generated[CONTROL])
            if agreement is not None:
                agreements.append(agreement)
            for name, fraction in _audit_round(workers[ORIGINAL], seed, generated, tie).items():
                audits.setdefault(name, []).append(fraction)
        original_after = tokens / workers[ORIGINAL].step()[0]
        fallbacks = {name: w.graph_fallback for name, w in workers.items() if w.graph_fallback}
    finally:
        for name in list(workers):
            stop(name)
        restore()
    return Rounds(workload=spec, winners=winners, baselines={w.task_id: baselines[w.task_id] for w in winners},
                  excluded=excluded, tokens_per_s=per_arm, agreements=agreements, audits=audits, original_before=original_before,
                  original_after=original_after, graph_fallbacks=fallbacks, confined=not unconfined)


def _audit_round(original: BenchWorker, seed: int, generated: dict[str, list[list[int]]], tie: float) -> dict[str, float]:
    """Each patched arm's fraction of this round's tokens within a near-tie of the unpatched model's
    choice. An arm that answered no tokens, or tokens of another shape, where the original answered
    some, did not produce the model's: 0.0, without asking."""
    trusted = generated[ORIGINAL]
    if not trusted:
        return {}  # a server workload: no tokens to audit
    shape = [len(row) for row in trusted]
    fractions = {}
    for name, rows in generated.items():
        if name == ORIGINAL:
            continue
        if [len(row) for row in rows] != shape:
            fractions[name] = 0.0
            continue
        fractions[name] = within_ties(original.audit(seed, rows), tie) or 0.0
    return fractions


def _round_order(names: list[str], seed: int) -> list[str]:
    """The arms in a random order of their own each round. A rotation would let every arm lead in
    turn but keep each behind the same neighbour, and what the arm before leaves behind (threads
    still spinning on a CPU, a warm or evicted cache) is then one arm's bias instead of noise."""
    order = list(names)
    random.Random(seed).shuffle(order)
    return order


def _find_the_slow_patch(suspects: list[ArmPatch], baselines: dict[str, ArmPatch], control: BenchWorker,
                         start: Callable[[Arm], BenchWorker], stop: Callable[[str], None]) -> ArmPatch:
    """Bisect ``suspects`` (together badly slow) down to one: each half is patched in alone (the
    others at their baselines) and stepped against the control. Assumes one winner is the cause;
    where only a combination is slow, the one it ends on belongs to that combination."""
    while len(suspects) > 1:
        half = suspects[: len(suspects) // 2]
        probe_arm = Arm(name="probe", patches=[w if w in half else baselines[w.task_id] for w in suspects])
        probe = start(probe_arm)
        try:
            seed = secrets.randbelow(2**31)
            slow = probe.step(seed)[0] * SMOKE_FLOOR > control.step(seed)[0]
        finally:
            stop("probe")
        suspects = half if slow else suspects[len(half):]
    return suspects[0]
