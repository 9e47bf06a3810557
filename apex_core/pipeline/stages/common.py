"""What several stages share: the Skip signal, the run's workload, where gradings go, and the
names of the folders stages write in a run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apex_core.executors import Executor
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.state import RunState
from apex_core.workloads import customize, get_workload
from apex_core.workloads.spec import WorkloadSpec

BENCHMARK_DIR, PROFILE_DIR, GRADINGS_DIR = "benchmark", "profile", "gradings"
SUMMARY_FILE = "results_summary.json"


class Skip(Exception):
    """The stage has nothing to do; its message says why (the stage is recorded as skipped)."""


def workload_spec(state: RunState) -> WorkloadSpec:
    config = state.config
    return customize(get_workload(config.workload), layers=config.layers, kernels=config.kernels or None)


def grading_devices(kernels: int) -> list[str | None]:
    """The GPU each kernel's gradings run on: round robin over this machine's GPUs, so kernels
    optimized in parallel spread over them (one timed grading per GPU at a time: the grader's device slots);
    None (the grader's default) without GPUs."""
    from apex_core.grader import gpu_count

    count = gpu_count()
    return [f"cuda:{i % count}" if count else None for i in range(kernels)]


@contextlib.contextmanager
def grading_executor(config: RunConfig) -> Iterator[Executor | None]:
    """The Ray executor a run's gradings go through with ``--executor ray`` (closed after the
    stage); None for the local executor, whose gradings run in this process as they always have."""
    if config.executor != "ray":
        yield None
        return
    from apex_core.executors import make_executor

    with make_executor("ray", config.ray_address) as executor:
        yield executor
