"""The source MCP server: the code and the documentation an agent reads before it writes a kernel.

A thin layer over ``apex_core.sources.explorer`` (the one source index the identifier uses too)
and ``apex_core.docsearch``: find a kernel by its profiler name, read numbered source, walk its
callers, callees and launch sites, search the indexed trees, and search the documentation (skills,
docs, hardware facts with their sources, kernel docstrings, AMD PDFs).
"""

from __future__ import annotations

import threading
import time
from typing import Annotated, Any, Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from apex_core.docsearch import DocHit, search
from apex_core.errors import ApexUserError
from apex_core.hardware.facts import HardwareFact, sourced_facts
from apex_core.hardware.specs import SOURCED_FIELDS
from apex_core.hardware.target import resolve_target
from apex_core.sources.explorer import CodeLines, CodeRef, GrepResult, SourceExplorer
from apex_core.sources.grep import SEARCH_TIMEOUT_S
from apex_core.sources.symbols import LaunchSite
from servers._common import READ_ONLY, create_server

mcp = create_server(
    "apex-source",
    "Reads the kernels of the installed inference stack (torch, triton, transformers, Liger, fla, vLLM, SGLang, aiter where "
    "installed, and source checkouts): find_kernel by the name a profiler shows, read_source with line numbers, "
    "find_callers / find_callees / list_launch_sites to see how it is called, grep_source to search the code, and "
    "search_docs for skills, docs and AMD PDFs, hardware_facts for a GPU's numbers with their sources.",
)

EXPLORER_TTL_S = 30.0
"""How long one built index serves calls before the next call refreshes it (a stat per file)."""
_explorer: tuple[float, SourceExplorer] | None = None
_explorer_lock = threading.Lock()

KernelName = Annotated[
    str, Field(min_length=1, max_length=2000, description="A kernel name as a profiler shows it (mangled or not), or a Python "
               "function's dotted name such as liger_kernel.ops.rms_norm.rms_norm_forward.")
]
Package = Annotated[str | None, Field(min_length=1, max_length=100, description="Only this indexed package, e.g. liger_kernel; default: all.")]


def _current_explorer() -> SourceExplorer:
    global _explorer
    with _explorer_lock:
        now = time.monotonic()
        if _explorer is None or now - _explorer[0] > EXPLORER_TTL_S:
            _explorer = (now, SourceExplorer.build())
        return _explorer[1]


async def _explore(work):  # type: ignore[no-untyped-def]
    return await anyio.to_thread.run_sync(lambda: work(_current_explorer()))


class KernelDefinition(BaseModel):
    name: str
    qualified_name: str
    language: str
    package: str
    version: str
    location: str = Field(description="path:line of the definition; pass it to read_source.")
    launchers: list[str] = Field(description="Functions that launch it.")


class KernelMatches(BaseModel):
    name: str
    found: bool
    kernels: list[KernelDefinition] = Field(description="The likeliest definition first; empty for a vendor library kernel.")


class CodeRefs(BaseModel):
    name: str
    refs: list[CodeRef]


class LaunchSites(BaseModel):
    kernel: str
    sites: list[LaunchSite]


class DocResults(BaseModel):
    query: str
    hits: list[DocHit]


class HardwareFacts(BaseModel):
    gpu: str = Field(description="the hardware model's key, e.g. mi355x")
    product: str
    arch: str
    family: str
    origin: str = Field(description="how the GPU was chosen: asked for, detected, or the default target")
    facts: list[HardwareFact]


HardwareField = Literal[SOURCED_FIELDS]  # type: ignore[valid-type]


@mcp.tool(annotations=READ_ONLY)
async def find_kernel(name: KernelName) -> KernelMatches:
    """Where a kernel is defined in the installed packages and checkouts, with its package version
    and launchers. Use it on a name from a profile before reading or replacing the kernel."""
    found = await _explore(lambda explorer: explorer.find(name))
    return KernelMatches(name=name, found=bool(found), kernels=[
        KernelDefinition(name=s.name, qualified_name=s.qualified_name, language=s.language, package=s.package, version=s.version,
                         location=s.location, launchers=list(s.launchers))
        for s in found
    ])


@mcp.tool(annotations=READ_ONLY)
async def read_source(
    location: Annotated[str, Field(min_length=1, max_length=4096, description="PATH, PATH:LINE, PATH:START-END inside the indexed "
                                   "sources, or a kernel or function name (its whole definition).")],
    context: Annotated[int, Field(ge=0, le=400, description="Lines shown before and after PATH:LINE.")] = 20,
) -> CodeLines:
    """Numbered source lines of an indexed file (at most 400 at a time). Use it to read a kernel,
    its launcher or any location that another tool returned."""
    return await _explore(lambda explorer: explorer.show(location, context=context))


@mcp.tool(annotations=READ_ONLY)
async def find_callers(
    name: KernelName,
    package: Package = None,
    limit: Annotated[int, Field(ge=1, le=200, description="At most this many places.")] = 50,
) -> CodeRefs:
    """Where a kernel is launched or a Python function called, each with its enclosing function.
    Use it to find the call path a patch must keep working."""
    refs = await _explore(lambda explorer: explorer.callers(name, package=package, limit=limit))
    return CodeRefs(name=name, refs=refs)


@mcp.tool(annotations=READ_ONLY)
async def find_callees(name: KernelName) -> CodeRefs:
    """What a kernel's or Python function's body calls and launches (builtins, tl.* and torch.*
    left out). Use it to see which kernels a launcher runs and which helpers a kernel uses."""
    refs = await _explore(lambda explorer: explorer.callees(name))
    return CodeRefs(name=name, refs=refs)


@mcp.tool(annotations=READ_ONLY)
async def list_launch_sites(name: KernelName) -> LaunchSites:
    """Every call that launches a kernel, with the launcher and the grid and arguments as written.
    Use it to learn the shapes, strides and meta-parameters a kernel really receives."""
    sites = await _explore(lambda explorer: explorer.launch_sites(name))
    return LaunchSites(kernel=name, sites=sites)


@mcp.tool(annotations=READ_ONLY)
async def grep_source(
    pattern: Annotated[str, Field(min_length=1, max_length=500, description="A Python regular expression matched against each "
                                  f"line on its own, e.g. tl\\.dot\\(; a search is stopped after {SEARCH_TIMEOUT_S:g} s")],
    package: Package = None,
    path_glob: Annotated[str | None, Field(min_length=1, max_length=200, description="Only files whose path in the package matches, e.g. */ops/*.py")] = None,
    ignore_case: Annotated[bool, Field(description="Match letters in either case.")] = False,
    limit: Annotated[int, Field(ge=1, le=1000, description="At most this many matching lines.")] = 100,
) -> GrepResult:
    """Search the indexed packages and checkouts line by line. Use it to find reference kernels
    that use an instruction, a layout or an idiom (e.g. tl.dot with a given dtype, __launch_bounds__).
    The search runs in its own process under a time limit, so other calls are answered meanwhile."""
    return await _explore(lambda explorer: explorer.grep(pattern, package=package, path_glob=path_glob, ignore_case=ignore_case,
                                                         limit=limit))


@mcp.tool(annotations=READ_ONLY)
async def search_docs(
    query: Annotated[str, Field(min_length=1, max_length=1000, description="What you want to know, e.g. LDS size per CU of the MI355X.")],
    k: Annotated[int, Field(ge=1, le=50, description="How many passages.")] = 5,
    kinds: Annotated[list[Literal["skill", "doc", "hardware", "docstring", "pdf"]] | None,
                     Field(min_length=1, max_length=5, description="Only passages of these kinds; default all.")] = None,
) -> DocResults:
    """Search the skills, Apex's docs, the hardware model's facts (with sources), kernel packages'
    docstrings and AMD PDFs; each passage comes with its source and section or page. Use it for
    hardware numbers and optimization advice you can cite."""
    hits = await anyio.to_thread.run_sync(lambda: search(query, k, kinds=kinds))
    return DocResults(query=query, hits=hits)


@mcp.tool(annotations=READ_ONLY)
def hardware_facts(
    gpu: Annotated[str | None, Field(min_length=2, max_length=32, description="Arch or product (gfx950, mi355x, gfx942, "
                                     "mi300x, sm_90, h200); default: the detected GPU, else gfx950.")] = None,
    fields: Annotated[list[HardwareField] | None, Field(min_length=1, max_length=len(SOURCED_FIELDS),
                                                       description="Only these numbers; default all.")] = None,
) -> HardwareFacts:
    """The GPU's numbers from Apex's hardware model (CUs, XCDs, LDS and L1 per CU, caches, HBM size
    and bandwidth, wavefront size, clock, peak FLOP/s per dtype), each with its unit and the public
    source it was read from. Use it for any hardware number you put in a kernel or an estimate."""
    target = resolve_target(gpu)
    spec = target.spec
    if spec is None:
        raise ApexUserError(f"the hardware model has no numbers for {target.arch}; ask for one it has, e.g. gfx950 or h200")
    return HardwareFacts(gpu=spec.key, product=spec.product_name, arch=spec.arch, family=spec.family, origin=target.origin,
                         facts=sourced_facts(spec, list(fields) if fields else None))


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
