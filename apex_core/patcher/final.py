"""``apex benchmark-final``: the workload with and without the applied patches, measured in one
session, alternately, and the change tested for significance.

Why alternately: on the H200 two processes of the same hour differed by 30% on one workload
(docs/benchmarks.md, "Workloads"), so a patched figure compared with a stored baseline from
another process measures the machine as much as the patch. Here one worker is started before the
patches are written (it keeps the original code it imported) and one after; their request mixes
alternate, timed by this process's clock, and each pair gives a ratio. The improvement is the
median ratio, and the change is significant when its 95% interval excludes 1.0. From 6 pairs on
the interval is the distribution-free one of a median (order statistics,
``grader.stats.median_interval``), which assumes nothing of the ratios' distribution: a hiccup of
the machine in one pair widens it up to 8 pairs and leaves it alone from 9. Fewer
pairs cannot give a distribution-free 95% interval (their range is one of 50% for 2 pairs, 94% for
5), so there it is Student's t on the log-ratios (``log_t_interval``), which assumes them normal
and widens with their disagreement. (Until 2026-12-02 a bootstrap of the median gave the pairs'
range and called it 95%.) An unpatched run before and after the pairs measures
drift. A smoke pair first: a patched model slower than half the original is bisected to the
patch that makes it so, which is left out (and reported) before the rest is measured. The model
reward (``apex_core.score.model_reward``) takes the patches' kernel scores from their gradings
under the results folder and the median ratio for tokens/s after over before.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.grader.stats import log_t_interval, median_interval, pairs_for_confidence
from apex_core.patcher.apply import apply_solutions
from apex_core.patcher.patcher import restore, status
from apex_core.progress import Progress, reporter
from apex_core.score import model_reward
from apex_core.workloads.spec import WorkloadSpec

FINAL_FILE = "final.json"
SMOKE_FLOOR = 0.5
CONFIDENCE = 0.95
MIN_PAIRS = pairs_for_confidence(CONFIDENCE)
"""The fewest pairs whose distribution-free interval can be a 95% one (6): the default."""
IntervalMethod = Literal["order statistics", "t on log ratios"]
DRIFT_THRESHOLD = 0.05


class FinalBenchmark(BaseModel):
    run_id: str
    workload: WorkloadSpec
    patches: list[dict[str, str]] = Field(description="task_id and solution of each patch measured")
    excluded: list[dict[str, str]] = Field(default_factory=list,
                                           description="patches left out: the smoke run found the model badly slow with them")
    runs: int
    original_tokens_per_s: list[float]
    patched_tokens_per_s: list[float]
    ratios: list[float]
    median_ratio: float
    interval: tuple[float, float] = Field(description="95% interval of the ratio (see interval_method)")
    interval_method: IntervalMethod = Field(description=(
        "order statistics: distribution-free, of the median (6 pairs or more); t on log ratios: of the geometric mean (fewer)"))
    interval_confidence: float = Field(description="the interval's confidence: exact for order statistics (at least 0.95)")
    significant: bool = Field(description="the interval excludes 1.0")
    improvement: float = Field(description="median ratio - 1")
    drift: float = Field(description="unpatched tokens/s after the pairs over before, minus 1")
    drift_flagged: bool
    verdict: str
    kernel_score: float | None = Field(description="mean normalized kernel score of the patches, from their gradings")
    model_reward: float | None = Field(description="0.7 x kernel_score + 0.3 x (median_ratio - 1); None without gradings")
    reward_note: str
    results_dir: str
    created_at: str


class _Worker:
    def __init__(self, spec: WorkloadSpec) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "apex_core.patcher.bench_worker", spec.model_dump_json()],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._expect("ready")

    def _expect(self, word: str) -> None:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                error = self.process.stderr.read()[-600:] if self.process.stderr else ""
                raise ApexUserError(f"the workload process ended before it was {word}: {error.strip().splitlines()[-1:] or 'no output'}")
            if line.strip() == word:
                return

    def step_seconds(self) -> float:
        assert self.process.stdin is not None
        start = time.perf_counter()
        self.process.stdin.write("step\n")
        self.process.stdin.flush()
        self._expect("done")
        return time.perf_counter() - start

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def as_first_benchmarked(workload_id: str, results_root: Path, runs: int | None) -> tuple[WorkloadSpec, int]:
    """The workload as the last ``apex benchmark`` of it resolved it (else the catalogue's), and the
    number of pairs: ``runs`` if given, else that benchmark's run count, else 5, and at least
    ``MIN_PAIRS`` (the fewest that can give a 95% interval) unless ``runs`` says otherwise."""
    from apex_core.workloads import get_workload
    from apex_core.workloads.runner import DEFAULT_RUNS, stored_results

    spec = get_workload(workload_id)
    first = [r for r in stored_results(results_root) if r.workload.id == spec.id]
    if first:
        spec = first[-1].workload
    if runs is not None:
        return spec, runs
    return spec, max(len(first[-1].runs) if first else DEFAULT_RUNS, MIN_PAIRS)


def workload_kernel_stacks(workload: str | None, results_root: Path) -> tuple[str, ...]:
    """The kernel stacks (``--kernels``) ``workload`` ran with in its last benchmark under
    ``results_root`` (else the catalogue's): whose patch points its winners go to. None: ()."""
    return as_first_benchmarked(workload, results_root, None)[0].kernels if workload else ()


class _Patch(BaseModel):
    task_id: str
    solution: str
    point: str | None = None


def _reapply(patches: list[_Patch], results_root: Path) -> None:
    """The environment holding exactly ``patches`` (each at the point it was applied at)."""
    restore()
    applied = apply_solutions([(p.task_id, Path(p.solution)) for p in patches], results_root,
                              points={p.task_id: p.point for p in patches if p.point})
    failed = [r for r in applied if not r.applied]
    if failed:
        raise ApexUserError(f"{failed[0].task_id} no longer passes inside the model ({failed[0].reason}); nothing was measured")


def _tokens_per_s(worker: _Worker, tokens: int) -> float:
    return tokens / worker.step_seconds()


def _badly_slow(original: _Worker, patched: _Worker, tokens: int) -> tuple[bool, float, float]:
    before, after = _tokens_per_s(original, tokens), _tokens_per_s(patched, tokens)
    return after < SMOKE_FLOOR * before, before, after


def _find_the_slow_patch(suspects: list[_Patch], spec: WorkloadSpec, original: _Worker, tokens: int, results_root: Path,
                         report: Callable[[float, str], None]) -> _Patch:
    """Bisect ``suspects`` (together badly slow) down to one: each half is patched alone and
    stepped against the original. Assumes one patch is the cause; where only a combination is
    slow, the patch it ends on is one of that combination."""
    while len(suspects) > 1:
        half = suspects[: len(suspects) // 2]
        report(0.15, f"bisecting: {len(suspects)} suspects, trying {', '.join(p.task_id for p in half)}")
        _reapply(half, results_root)
        probe = _Worker(spec)
        try:
            slow, _, _ = _badly_slow(original, probe, tokens)
        finally:
            probe.close()
        suspects = half if slow else suspects[len(half):]
    return suspects[0]


def benchmark_final(spec: WorkloadSpec, runs: int, results_root: Path, *, warmup: int = 2,
                    progress: Progress | None = None) -> FinalBenchmark:
    """Measure ``spec`` with and without this environment's applied patches, then restore."""
    report = reporter(progress)
    if runs < 2:
        raise ApexUserError(f"--runs {runs}: the interval needs at least 2 pairs ({MIN_PAIRS} by default)")
    journal = status()
    applied = [p for p in (journal.active() if journal else []) if p.state == "applied"]
    if not applied:
        raise ApexUserError("nothing is patched in this environment: apply the winners first (apex patch apply or apex integrate)")
    patches = [_Patch(task_id=p.task_id or "", solution=p.solution or "", point=p.point) for p in applied]
    spec = spec.resolved()
    tokens = spec.batch * (spec.prompt_tokens + spec.decode_tokens)
    excluded: list[dict[str, str]] = []
    report(0.0, f"unpatching to start the original {spec.id}")
    restore()
    workers: list[_Worker] = []
    try:
        original = _Worker(spec)
        workers.append(original)
        for _ in range(warmup):
            original.step_seconds()
        while True:
            report(0.1, f"patching {len(patches)} solution(s) back in")
            _reapply(patches, results_root)
            patched = _Worker(spec)
            workers.append(patched)
            for _ in range(warmup):
                patched.step_seconds()
            slow, before, smoke = _badly_slow(original, patched, tokens)
            if not slow:
                break
            if len(patches) == 1:
                raise ApexUserError(f"the patched model runs at {smoke:,.0f} tokens/s, under half the original's {before:,.0f}: "
                                    f"the patch of {patches[0].task_id} is badly slow inside the model; nothing was measured")
            workers.remove(patched)
            patched.close()
            culprit = _find_the_slow_patch(patches, spec, original, tokens, results_root, report)
            excluded.append({"task_id": culprit.task_id, "solution": culprit.solution,
                             "reason": f"with every patch the model ran at {smoke:,.0f} tokens/s against the original's "
                                       f"{before:,.0f} (under half); bisection found this patch"})
            patches = [p for p in patches if p != culprit]
        originals, patcheds = [], []
        for index in range(runs):
            report(0.2 + 0.7 * index / runs, f"pair {index + 1}/{runs}")
            if index % 2 == 0:  # who goes first alternates, so neither always runs on a warmer machine
                original_s, patched_s = original.step_seconds(), patched.step_seconds()
            else:
                patched_s, original_s = patched.step_seconds(), original.step_seconds()
            originals.append(tokens / original_s)
            patcheds.append(tokens / patched_s)
        after = _tokens_per_s(original, tokens)
    finally:
        for worker in workers:
            worker.close()
        restore()
    ratios = [p / o for p, o in zip(patcheds, originals)]
    low, high, confidence, method = ratio_interval(ratios)
    median_ratio = statistics.median(ratios)
    significant = low > 1.0 or high < 1.0
    drift = after / before - 1
    verdict = final_verdict(median_ratio, low, high, method, len(ratios))
    kernel_score, reward_note = integrated_kernel_score(patches, results_root)
    reward = model_reward(kernel_score, 1.0, median_ratio) if kernel_score is not None else None
    created = dt.datetime.now(dt.timezone.utc)
    run_id = f"{created.strftime('%Y%m%d-%H%M%S')}-{spec.id}-final-{secrets.token_hex(3)}"
    folder = results_root / run_id
    result = FinalBenchmark(
        run_id=run_id, workload=spec, patches=[{"task_id": p.task_id, "solution": p.solution} for p in patches],
        excluded=excluded, runs=runs, original_tokens_per_s=originals, patched_tokens_per_s=patcheds, ratios=ratios,
        median_ratio=median_ratio, interval=(low, high), interval_method=method, interval_confidence=confidence,
        significant=significant, improvement=median_ratio - 1, drift=drift,
        drift_flagged=abs(drift) > DRIFT_THRESHOLD, verdict=verdict, kernel_score=kernel_score, model_reward=reward,
        reward_note=reward_note, results_dir=str(folder), created_at=created.isoformat(),
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FINAL_FILE).write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    report(1.0, verdict)
    return result


def ratio_interval(ratios: list[float]) -> tuple[float, float, float, IntervalMethod]:
    """The pairs' 95% interval, its confidence and how it was made: order statistics where they reach 95%, else t."""
    low, high, confidence = median_interval(ratios, CONFIDENCE)
    if confidence >= CONFIDENCE:
        return low, high, confidence, "order statistics"
    low, high = log_t_interval(ratios)
    return low, high, CONFIDENCE, "t on log ratios"


def final_verdict(median_ratio: float, low: float, high: float, method: IntervalMethod, pairs: int) -> str:
    """One line: faster or slower by how much, or no significant change, with the interval and its kind."""
    how = f"95% interval {low:.3f}-{high:.3f}x, {pairs} pairs" + (", t on log ratios" if method == "t on log ratios" else "")
    if low > 1.0 or high < 1.0:
        return f"{'faster' if median_ratio > 1 else 'slower'} by {abs(median_ratio - 1):.1%} ({how})"
    return f"no significant change: median ratio {median_ratio:.3f}x ({how}, includes 1.0)"


def integrated_kernel_score(patches: list[_Patch], results_root: Path) -> tuple[float | None, str]:
    """The mean normalized kernel score of the measured patches, each from its grading under
    ``results_root`` (the same file, by sha256), and a note on how it was found."""
    from apex_core.grader.solution_file import file_hash
    from apex_core.patcher.integrate import find_gradings

    gradings = find_gradings(results_root) if results_root.exists() else []
    scores, missing = [], []
    for patch in patches:
        path = Path(patch.solution)
        digest = file_hash(path) if path.is_file() else None
        matching = [(order, r, where) for order, (r, where) in enumerate(gradings)
                    if r.task_id == patch.task_id and r.provenance.solution_hash == digest]
        if matching:
            # The newest grading of the file (the pipeline's fresh regrade), not the best of several:
            # the best of noisy measurements of one file overstates it (the winner's curse).
            _, newest, _ = max(matching, key=lambda item: (item[2].stat().st_mtime_ns, item[0]))
            scores.append(newest.score.normalized)
        else:
            missing.append(patch.task_id)
    if missing:
        return None, (f"no grading under {results_root} of the patched file of {', '.join(missing)}: the model reward needs "
                      "every patch's kernel score (apex grade --json > FILE in that folder)")
    return statistics.fmean(scores), (f"0.7 x mean normalized kernel score of {len(scores)} patch(es) + 0.3 x (median "
                                      "tokens/s ratio - 1)")
