"""The profiler MCP server: end-to-end workloads, benchmarked and profiled.

A thin layer over ``apex_core.workloads`` and ``apex_core.analysis``: list the workloads, measure
one (tokens/s, latency percentiles, CV, drift), or profile one (where the time goes: a kernel table
and a Chrome trace). Results land in ``results/<run-id>/`` under the server's working folder; the
identifier server reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastmcp import Context
from pydantic import BaseModel, Field

from apex_core.analysis import ProfileSummary
from apex_core.analysis import profile_workload as run_profile
from apex_core import workloads
from apex_core.patcher.original import refuse_if_patched
from apex_core.workloads import BenchmarkResult, benchmark, customize, get_workload
from servers._common import READ_ONLY, create_server, in_thread_with_progress

mcp = create_server(
    "apex-profiler",
    "Runs Apex's end-to-end workloads (a model from the registry, built with random weights, or cpu-mini on the CPU): "
    "list_workloads to see them, benchmark_workload for tokens/s with the runs' spread, profile_workload for where the "
    "time goes (a kernel table and a Perfetto trace). Then call the identifier's identify_kernels on the results_dir.",
)

RESULTS_ROOT = Path("results")
WorkloadId = Annotated[str, Field(min_length=2, max_length=64, description="Workload id from list_workloads, e.g. cpu-mini.")]
Layers = Annotated[int | None, Field(ge=1, le=256, description="Decoder layers to build; default: the workload's reduced default.")]
Kernels = Annotated[
    str | None,
    Field(min_length=3, max_length=32, pattern=r"^[a-z]+(,[a-z]+)*$",
          description="Kernel stacks to apply, comma-separated: liger, fla (GPU only); default none."),
]


class WorkloadEntry(BaseModel):
    id: str
    model: str
    stack: str
    layers: int | None
    batch: int
    prompt_tokens: int
    decode_tokens: int
    dtype: str
    device: str
    description: str


class WorkloadList(BaseModel):
    workloads: list[WorkloadEntry]


@mcp.tool(annotations=READ_ONLY)
def list_workloads() -> WorkloadList:
    """The workloads this machine can run, with their model, stack, sizes and device. Use it to pick
    the workload id for benchmark_workload and profile_workload."""
    return WorkloadList(workloads=[
        WorkloadEntry(id=s.id, model=s.model, stack=s.stack, layers=s.layers, batch=s.batch, prompt_tokens=s.prompt_tokens,
                      decode_tokens=s.decode_tokens, dtype=s.dtype, device=s.device, description=s.description)
        for s in workloads.list_workloads()
    ])


@mcp.tool
async def benchmark_workload(
    workload: WorkloadId,
    ctx: Context,
    layers: Layers = None,
    kernels: Kernels = None,
    runs: Annotated[int, Field(ge=2, le=20, description="Measured runs (the CV needs at least 2).")] = 5,
    cache_hours: Annotated[float, Field(ge=0, le=168, description="Reuse a result of this workload and environment this recent; 0 measures.")] = 0.0,
) -> BenchmarkResult:
    """Measure a workload end to end: tokens/s for prefill and decode (medians over the runs),
    decode-step latency percentiles, the runs' CV and drift against the last run. Use it before and
    after a change to see what the change is worth."""
    refuse_if_patched("benchmark_workload")
    spec = customize(get_workload(workload), layers=layers, kernels=kernels)
    return await in_thread_with_progress(
        ctx, lambda progress: benchmark(spec, runs=runs, cache_hours=cache_hours, results_dir=RESULTS_ROOT, progress=progress)
    )


@mcp.tool
async def profile_workload(
    workload: WorkloadId,
    ctx: Context,
    layers: Layers = None,
    kernels: Kernels = None,
    calls: Annotated[int, Field(ge=1, le=10, description="Request mixes recorded by the profiler.")] = 3,
    top: Annotated[int, Field(ge=1, le=100, description="Kernels to return, hottest first.")] = 15,
) -> ProfileSummary:
    """Profile a workload: the hottest kernels with their share of the time, and a trace. Use it to
    find what to optimize, then identify_kernels on the returned results_dir."""
    spec = customize(get_workload(workload), layers=layers, kernels=kernels)
    result, run_dir = await in_thread_with_progress(
        ctx, lambda progress: run_profile(spec, RESULTS_ROOT, calls=calls, progress=progress)
    )
    return ProfileSummary.of(result, run_dir, spec.id, top)


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
