"""``apex benchmark-final``: the workload with and without the applied patches, measured in one
session, alternately, and the change tested for significance.

Why alternately: on the H200 two processes of the same hour differed by 30% on one workload
(docs/benchmarks.md, "Workloads"), so a patched figure compared with a stored baseline from
another process measures the machine as much as the patch. Here one worker is started before the
patches are written (it keeps the original code it imported) and one after; their request mixes
alternate, timed by this process's clock, and each pair gives a ratio. The improvement is the
median ratio; its 95% interval comes from a bootstrap over the pairs, and the change is
significant when the interval excludes 1.0. An unpatched run before and after the pairs measures
drift. A smoke pair first: a patched model slower than half the original stops the run.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.patcher.apply import apply_solutions
from apex_core.patcher.patcher import restore, status
from apex_core.progress import Progress, reporter
from apex_core.workloads.spec import WorkloadSpec

FINAL_FILE = "final.json"
BOOTSTRAP_SAMPLES = 10_000
SMOKE_FLOOR = 0.5
DRIFT_THRESHOLD = 0.05


class FinalBenchmark(BaseModel):
    run_id: str
    workload: WorkloadSpec
    patches: list[dict[str, str]] = Field(description="task_id and solution of each patch measured")
    runs: int
    original_tokens_per_s: list[float]
    patched_tokens_per_s: list[float]
    ratios: list[float]
    median_ratio: float
    interval: tuple[float, float] = Field(description="95% bootstrap interval of the median ratio")
    significant: bool
    improvement: float = Field(description="median ratio - 1")
    drift: float = Field(description="unpatched tokens/s after the pairs over before, minus 1")
    drift_flagged: bool
    verdict: str
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
    number of pairs: ``runs`` if given, else that benchmark's run count, else 5."""
    from apex_core.workloads import get_workload
    from apex_core.workloads.runner import DEFAULT_RUNS, stored_results

    spec = get_workload(workload_id)
    first = [r for r in stored_results(results_root) if r.workload.id == spec.id]
    if first:
        spec = first[-1].workload
    return spec, runs if runs is not None else (len(first[-1].runs) if first else DEFAULT_RUNS)


def bootstrap_median_interval(ratios: list[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of ``ratios``."""
    import numpy as np

    values = np.asarray(ratios, dtype=np.float64)
    rng = np.random.default_rng(seed)
    medians = np.median(values[rng.integers(0, len(values), size=(samples, len(values)))], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def benchmark_final(spec: WorkloadSpec, runs: int, results_root: Path, *, warmup: int = 2,
                    progress: Progress | None = None) -> FinalBenchmark:
    """Measure ``spec`` with and without this environment's applied patches, then restore."""
    report = reporter(progress)
    if runs < 2:
        raise ApexUserError(f"--runs {runs}: the interval needs at least 2 pairs (5 by default, as the first benchmark)")
    journal = status()
    applied = [p for p in (journal.active() if journal else []) if p.state == "applied"]
    if not applied:
        raise ApexUserError("nothing is patched in this environment: apply the winners first (apex patch apply or apex integrate)")
    pairs = [(p.task_id or "", Path(p.solution or "")) for p in applied]
    spec = spec.resolved()
    tokens = spec.batch * (spec.prompt_tokens + spec.decode_tokens)
    report(0.0, f"unpatching to start the original {spec.id}")
    restore()
    workers: list[_Worker] = []
    try:
        original = _Worker(spec)
        workers.append(original)
        report(0.1, f"patching {len(pairs)} solution(s) back in")
        reapplied = apply_solutions(pairs, results_root)
        failed = [r for r in reapplied if not r.applied]
        if failed:
            raise ApexUserError(f"{failed[0].task_id} no longer passes inside the model ({failed[0].reason}); nothing was measured")
        patched = _Worker(spec)
        workers.append(patched)
        for _ in range(warmup):
            original.step_seconds()
            patched.step_seconds()
        before = tokens / original.step_seconds()
        smoke = tokens / patched.step_seconds()
        if smoke < SMOKE_FLOOR * before:
            raise ApexUserError(f"the patched model runs at {smoke:,.0f} tokens/s, under half the original's {before:,.0f}: "
                                f"one of the patches ({', '.join(t for t, _ in pairs)}) is badly slow; apply them one at a time")
        originals, patcheds = [], []
        for index in range(runs):
            report(0.2 + 0.7 * index / runs, f"pair {index + 1}/{runs}")
            if index % 2 == 0:  # who goes first alternates, so neither always runs on a warmer machine
                original_s, patched_s = original.step_seconds(), patched.step_seconds()
            else:
                patched_s, original_s = patched.step_seconds(), original.step_seconds()
            originals.append(tokens / original_s)
            patcheds.append(tokens / patched_s)
        after = tokens / original.step_seconds()
    finally:
        for worker in workers:
            worker.close()
        restore()
    ratios = [p / o for p, o in zip(patcheds, originals)]
    low, high = bootstrap_median_interval(ratios)
    median_ratio = statistics.median(ratios)
    significant = low > 1.0 or high < 1.0
    drift = after / before - 1
    verdict = (f"{'faster' if median_ratio > 1 else 'slower'} by {abs(median_ratio - 1):.1%} (95% interval "
               f"{low:.3f}-{high:.3f}x)" if significant else
               f"no significant change: median ratio {median_ratio:.3f}x, 95% interval {low:.3f}-{high:.3f}x includes 1.0")
    created = dt.datetime.now(dt.timezone.utc)
    run_id = f"{created.strftime('%Y%m%d-%H%M%S')}-{spec.id}-final-{secrets.token_hex(3)}"
    folder = results_root / run_id
    result = FinalBenchmark(
        run_id=run_id, workload=spec, patches=[{"task_id": t, "solution": str(s)} for t, s in pairs], runs=runs,
        original_tokens_per_s=originals, patched_tokens_per_s=patcheds, ratios=ratios, median_ratio=median_ratio,
        interval=(low, high), significant=significant, improvement=median_ratio - 1, drift=drift,
        drift_flagged=abs(drift) > DRIFT_THRESHOLD, verdict=verdict, results_dir=str(folder), created_at=created.isoformat(),
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FINAL_FILE).write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    report(1.0, verdict)
    return result


