"""The benchmark stage: the original stack's throughput the run starts from (never a patched one)."""

from __future__ import annotations

from pathlib import Path

from apex_core.pipeline.figures import BaselineFigures
from apex_core.pipeline.stages.common import BENCHMARK_DIR, Skip, workload_spec
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress

def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher.original import refuse_if_patched
    from apex_core.workloads.runner import benchmark

    if state.config.tasks:
        raise Skip("optimizing the given tasks alone: no workload to measure")
    refuse_if_patched("the run's first benchmark")
    result = benchmark(workload_spec(state), state.config.runs, cache_hours=state.config.cache_hours,
                       results_dir=state.folder / BENCHMARK_DIR, progress=progress)
    state.baseline = BaselineFigures(tokens_per_s=result.tokens_per_s, cv=result.cv, runs=[r.tokens_per_s for r in result.runs],
                                     cached=result.cached, file=str(Path(result.results_dir) / "benchmark.json"),
                                     workload=result.workload.model_dump(mode="json"))
    cv = f", CV {result.cv:.1%}" if result.cv is not None else ""
    return f"{result.tokens_per_s:,.0f} tokens/s over {len(result.runs)} runs{cv}"
