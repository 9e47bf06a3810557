"""The patcher MCP server: graded winners into the installed stack, and the model measured again.

A thin layer over ``apex_core.patcher`` and the pipeline's integrate and benchmark-final stages
(``apex_core.pipeline.stages``): apply one solution graded here (checked inside the model, rolled
back alone if it fails there), integrate the winners of a folder of signed gradings, show or undo
what is patched, and run the final benchmark (original and patched model alternately, the tokens/s ratio
with its interval, then everything restored). Every change goes through the crash-safe journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from fastmcp import Context
from fastmcp.exceptions import ToolError
from pydantic import BaseModel, Field

from apex_core.grader import default_cache_dir
from apex_core.patcher import EnvironmentStatus, RestoreReport, environment_status, restore
from apex_core.patcher.accuracy import AccuracyReport, accuracy_gate
from apex_core.patcher.apply import AppliedPatch, apply_solutions
from apex_core.patcher.gradings import require_graded
from apex_core.pipeline.stages.final.benchmark import FinalBenchmark, as_first_benchmarked, benchmark_final, workload_kernel_stacks
from apex_core.pipeline.stages.identify import profiled_shares
from apex_core.pipeline.stages.integrate import IntegrationReport, integrate
from apex_core.progress import Progress
from servers._common import READ_ONLY, create_server, in_thread_with_progress
from servers._paths import RESULTS_ROOT, inside_results

mcp = create_server(
    "apex-patcher",
    "Puts graded kernel solutions into the installed inference stack and measures the model again: apply_patch for one "
    "solution (checked inside the model), integrate_winners for the winners of a folder of gradings, patch_status and "
    "restore_patches to see or undo what is patched, run_final_benchmark for the end-to-end tokens/s change with its "
    "interval. Changes are journaled and undone after a crash.",
)

WorkloadField = Annotated[str | None, Field(
    min_length=2, max_length=64, description="The workload the patches are for, e.g. llama-3-1-8b-instruct: the points of "
                                             "its kernel stack (as its last benchmark ran it, e.g. Liger's) are used.")]


def _kernel_stacks(workload: str | None) -> tuple[str, ...]:
    return workload_kernel_stacks(workload, RESULTS_ROOT)


class Restored(BaseModel):
    restored: bool = Field(description="false when nothing was patched")
    report: RestoreReport | None


@mcp.tool
async def apply_patch(
    ctx: Context,
    task_id: Annotated[str, Field(min_length=3, max_length=128, description="The task, e.g. cpu-mini__rms_norm.")],
    solution_path: Annotated[str, Field(min_length=1, max_length=4096, description="The solution file you graded.")],
    workload: WorkloadField = None,
) -> AppliedPatch:
    """Patch one graded solution into the installed stack and check it inside the model; a patch that
    breaks the import, is wrong in the model or crashes it is rolled back, and the call is an error saying why.
    The file must be unchanged since grade_solution graded it here, and that newest grading ok, correct and
    unflagged. Use it after grade_solution credited a speedup, before run_final_benchmark."""
    def graded_then_applied(progress: Progress) -> AppliedPatch:
        grading = require_graded(task_id, Path(solution_path))
        return apply_solutions([(task_id, Path(solution_path))], RESULTS_ROOT, kernel_stacks=_kernel_stacks(workload),
                               graded_sha256={task_id: grading.provenance.solution_hash}, progress=progress)[0]

    patch = await in_thread_with_progress(ctx, graded_then_applied)
    if not patch.applied:  # a result that reads like success would be acted on as one
        raise ToolError(f"{task_id}: not applied, rolled back ({patch.reason}); the installed stack is as it was. "
                        f"Fix {solution_path}, grade it again, then apply it.")
    return patch


@mcp.tool
async def integrate_winners(
    ctx: Context,
    results_dir: Annotated[str, Field(min_length=1, max_length=4096, description=(
        "Folder of grade results (apex grade --json files), inside results/ or the grader's result folder (where "
        "grade_solution's result_path lies); only gradings this installation's judge signed count."))],
    min_speedup: Annotated[float, Field(gt=0, le=100, description="Credited speedup a winner needs.")] = 1.05,
    workload: WorkloadField = None,
) -> IntegrationReport:
    """Patch in the winners among graded solutions (signed by this installation's judge, confined, correct, unflagged,
    speedup >= min_speedup with its interval above 1.0, unchanged since graded), each checked inside the model; results
    in agents' workspaces (output/<task>/) are not taken. Use it when several tasks were graded."""
    # Read only where gradings are kept: results/ and the grader's own result files, never any folder named.
    folder = inside_results(results_dir, "results_dir", "results/gradings", also=[default_cache_dir() / "results"])
    return await in_thread_with_progress(ctx, lambda progress: integrate(folder, min_speedup,
                                                                         kernel_stacks=_kernel_stacks(workload), progress=progress))


@mcp.tool(annotations=READ_ONLY)
async def patch_status() -> EnvironmentStatus:
    """What is patched in this environment (each patch's task, solution, state and replaced files), and every
    other change since the patch session began, whoever made it (new, removed, replaced or edited files, .pth
    files and bytecode included), each with its way back. Use it before patching or benchmarking, to know which
    code the model runs."""
    return await anyio.to_thread.run_sync(environment_status)


@mcp.tool
async def restore_patches() -> Restored:
    """Undo every patch and every other change since the patch session began: patched files put back byte for
    byte and checked against their recorded sha256, new files removed, replaced ones brought back; what cannot be
    (an edit in place) fails the call with its way back, and patch_status keeps listing it. Use it when you are
    done, or before measuring the original stack."""
    report = await anyio.to_thread.run_sync(restore)
    return Restored(restored=report is not None, report=report)


@mcp.tool
async def check_accuracy(
    ctx: Context,
    workload: Annotated[str, Field(min_length=2, max_length=64, description="The workload whose model is compared, e.g. cpu-mini.")],
    prompts: Annotated[int, Field(ge=1, le=64, description="Fixed prompts run through both models.")] = 4,
    tokens: Annotated[int, Field(ge=1, le=512, description="Greedy tokens decoded per prompt after the prefill's.")] = 16,
) -> AccuracyReport:
    """The accuracy gate on what is patched: the patched model against the original (same weights, seed and prompts),
    logits (relative and absolute error, KL) and greedy tokens up to the first near-tie, under thresholds per dtype.
    A failing patch set is bisected and the patches that make it fail are rolled back (culprits, each with its reason);
    the environment keeps exactly the patches that passed (kept). Use it after apply_patch or integrate_winners, before
    run_final_benchmark."""
    spec, _ = as_first_benchmarked(workload, RESULTS_ROOT, None)
    return await in_thread_with_progress(ctx, lambda progress: accuracy_gate(spec, RESULTS_ROOT, prompts=prompts, tokens=tokens,
                                                                             progress=progress))


@mcp.tool
async def run_final_benchmark(
    ctx: Context,
    workload: Annotated[str, Field(min_length=2, max_length=64, description="The workload of the first benchmark, e.g. cpu-mini.")],
    runs: Annotated[int | None, Field(ge=2, le=50, description="Rounds (each arm once per round); default: as many as the last benchmark, at least 6.")] = None,
) -> FinalBenchmark:
    """Measure the workload three ways in one session: original, control (the task baselines at the winners'
    patch points) and candidate (the applied winners). kernel_gain (candidate / control) is what the kernels
    earned and the only gain the model reward credits; integration_gain (control / original) is what the patch
    adapters do by themselves. Each winner's end-to-end credit (leave-one-out) comes with its Amdahl bound;
    flags say why a gain is not credited. Every patch is restored afterwards. Use it after apply_patch or
    integrate_winners to learn what the kernels did for the whole model."""
    spec, count = as_first_benchmarked(workload, RESULTS_ROOT, runs)
    shares = profiled_shares(spec.resolved(), RESULTS_ROOT)
    return await in_thread_with_progress(ctx, lambda progress: benchmark_final(spec, count, RESULTS_ROOT, shares=shares,
                                                                               progress=progress))


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
