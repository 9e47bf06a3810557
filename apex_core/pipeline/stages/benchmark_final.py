"""The benchmark-final stage: original, control and candidate in rounds (the ``final`` package beside
this module holds the benchmark: ``final/benchmark.py``)."""

from __future__ import annotations

from pathlib import Path

from apex_core.pipeline.figures import FinalFigures
from apex_core.pipeline.stages.common import BENCHMARK_DIR, Skip, workload_spec
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress

def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher import status
    from apex_core.pipeline.stages.final.benchmark import as_first_benchmarked, benchmark_final

    journal = status()
    if not any(k.integrated for k in state.kernels) or journal is None or not journal.active():
        raise Skip("nothing is patched in: there is no change to measure")
    spec, runs = as_first_benchmarked(workload_spec(state).id, state.folder / BENCHMARK_DIR, state.config.final_pairs)
    shares: dict[str, float] = {}
    for record in state.kernels:  # a task may stand for several profiled kernels: their shares add up
        shares[record.task_id] = shares.get(record.task_id, 0.0) + record.device_time_share
    result = benchmark_final(spec, runs, state.folder, shares=shares, progress=progress)
    state.final = FinalFigures.model_validate({**result.model_dump(exclude={"workload"}),
                                              "file": str(Path(result.results_dir) / "final.json")})
    return result.verdict
