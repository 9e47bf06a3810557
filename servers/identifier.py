"""The identifier MCP server: what a profiled workload's hot kernels are and where their code is.

A thin layer over the identify stage (``apex_core.pipeline.stages.identify``) and ``apex_core.sources``: identify the kernels of a run
the profiler server wrote (kind, source, whether it can be patched, our task, the shapes the model
passes), or find the source of one kernel by the name a profiler shows. The run folder a caller
names must lie inside results/ (``servers._paths``): identifying writes identify.json into it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import Context
from pydantic import BaseModel, Field

from apex_core.pipeline.stages.identify import IdentifyReport, identify_run, latest_run
from apex_core.sources import build_index
from servers._common import READ_ONLY, create_server, in_thread_with_progress
from servers._paths import RESULTS_ROOT, inside_results

mcp = create_server(
    "apex-identifier",
    "Says what the hot kernels of a profiled workload are: kind, source file and line, whether a patch can replace "
    "them, which Apex task optimizes them, and the shapes the model calls them with. Use identify_kernels after the "
    "profiler's profile_workload; find_kernel_source to locate one kernel by its profiler name.",
)

NameList = Annotated[
    str | None,
    Field(min_length=2, max_length=200, pattern=r"^[a-z0-9_]+(,[a-z0-9_]+)*$", description="Comma-separated names; default: all."),
]


class KernelSource(BaseModel):
    name: str
    found: bool
    source: str | None = Field(description="path:line of the kernel's definition, or null when no source is indexed.")
    package: str | None
    version: str | None
    launchers: list[str] = Field(description="Functions that launch the kernel.")


@mcp.tool
async def identify_kernels(
    ctx: Context,
    results_dir: Annotated[str | None, Field(min_length=1, max_length=4096, description=(
        "A run folder from profile_workload, inside results/ (its results_dir); default: the newest."))] = None,
    top_k: Annotated[int, Field(ge=1, le=100, description="How many kernels to report, hottest first.")] = 10,
    kernel_types: NameList = None,
    kinds: NameList = None,
    record_shapes: Annotated[bool, Field(description="Run the model once more to record the shapes at patchable call sites.")] = True,
) -> IdentifyReport:
    """Identify the hottest kernels of a profiled run. Use it after profile_workload to choose which
    task to optimize: each kernel comes with its task_id (or null) and the shapes it is called with."""
    run_dir = inside_results(results_dir, "results_dir", "the results_dir profile_workload returned") if results_dir else latest_run(RESULTS_ROOT)
    split = lambda value: [v for v in value.split(",") if v] if value else None  # noqa: E731
    return await in_thread_with_progress(
        ctx, lambda progress: identify_run(run_dir, top_k=top_k, kernel_types=split(kernel_types), kinds=split(kinds),
                                           record_shapes=record_shapes, progress=progress)
    )


@mcp.tool(annotations=READ_ONLY)
async def find_kernel_source(
    name: Annotated[str, Field(min_length=2, max_length=2000, description="A kernel name as a profiler shows it (mangled or not).")],
) -> KernelSource:
    """Where a kernel is defined in the installed packages and checkouts (Triton kernels, and
    HIP/CUDA kernels by mangled or demangled name), with its launchers. Use it when a profile names
    a kernel you want to read before optimizing it; apex-source's tools read the code around it."""
    import anyio.to_thread

    index = await anyio.to_thread.run_sync(build_index)
    symbol = index.find_kernel(name)
    if symbol is None:
        return KernelSource(name=name, found=False, source=None, package=None, version=None, launchers=[])
    return KernelSource(name=name, found=True, source=symbol.location, package=symbol.package, version=symbol.version,
                        launchers=list(symbol.launchers))


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
