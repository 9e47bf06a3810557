"""``apex profile`` and ``apex identify``: where a workload's device time goes, and what it is.

``profile`` runs a workload under torch.profiler and writes ``results/<run-id>/`` (profile.json,
trace.json for Perfetto, workload.json); ``identify`` reads the newest run folder (or ``--results
DIR``) and prints the hot kernels with their kind, source, patchability, task and shapes. Both print
JSON on stdout with --json and progress on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

import typer
from rich.table import Table

from apex_core.cli.output import JsonOption, console, print_json, progress_reporter
from apex_core.errors import ApexUserError

DEFAULT_RESULTS = Path("results")


def register(main_app: typer.Typer) -> None:
    """Add ``apex profile`` and ``apex identify`` to the main command."""
    main_app.command("profile")(profile_command)
    main_app.command("identify")(identify_command)


def profile_command(
    workload: Annotated[str, typer.Option("--workload", help="Workload id (apex workloads list), e.g. cpu-mini.")],
    layers: Annotated[Optional[int], typer.Option(help="Decoder layers to build (default: the model's reduced default).")] = None,
    kernels: Annotated[Optional[str], typer.Option(help="Kernel stacks to apply: liger, fla (comma-separated; GPU only).")] = None,
    calls: Annotated[int, typer.Option(help="Request mixes recorded by the profiler.")] = 3,
    warmup: Annotated[int, typer.Option(help="Unrecorded request mixes first.")] = 1,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda or cuda:N.")] = None,
    top: Annotated[int, typer.Option(help="Rows of the kernel table to print.")] = 15,
    results_dir: Annotated[Path, typer.Option(help="Where results/<run-id>/ go.")] = DEFAULT_RESULTS,
    as_json: JsonOption = False,
) -> None:
    """Profile a workload: a kernel table (device kernels on a GPU, CPU ops by module on the CPU) and a Chrome trace."""
    from apex_core.analysis import ProfileSummary, profile_workload
    from apex_core.workloads import customize, get_workload

    if top < 1:
        raise ApexUserError(f"--top must be at least 1, not {top}")
    spec = customize(get_workload(workload), layers=layers, kernels=kernels, device=device)
    with progress_reporter("profiling") as progress:
        result, run_dir = profile_workload(spec, results_dir, calls=calls, warmup=warmup, progress=progress)
    summary = ProfileSummary.of(result, run_dir, spec.id, top)
    if as_json:
        print_json(summary.model_dump(mode="json"))
        return
    table = Table(title=summary.title())
    for column in ("share", "time (us)", "calls", "name", "module"):
        table.add_column(column)
    for k in summary.kernels:
        table.add_row(f"{100 * (k.share or 0):.1f}%", f"{k.total_time_us:.0f}", str(k.calls), k.name[:80], k.module or "")
    console.print(table)
    console.print(f"trace (Perfetto): {summary.trace}")


def identify_command(
    results: Annotated[Optional[Path], typer.Option("--results", help="A run folder of 'apex profile' (default: the newest under ./results).")] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="How many kernels to report.")] = 10,
    kernel_types: Annotated[Optional[str], typer.Option(help="Keep only these kernel types (comma-separated: triton, aten, cublas, ...).")] = None,
    kinds: Annotated[Optional[str], typer.Option(help="Keep only these kernel kinds (comma-separated: rms_norm, gemm_bf16, ...).")] = None,
    filter_stage: Annotated[str, typer.Option("--filter", help="Apply the filters 'before' or 'after' taking the top k.")] = "before",
    record_shapes: Annotated[bool, typer.Option("--shapes/--no-shapes", help="Run the model once more to record the shapes at patchable call sites.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Identify a profiled run's hot kernels: kind, source, whether it can be patched, our task, the shapes it is called with."""
    from apex_core.pipeline.stages.identify import identify_run, latest_run

    if filter_stage not in ("before", "after"):
        raise ApexUserError(f"--filter takes 'before' or 'after', not {filter_stage!r}")
    stage: Literal["before", "after"] = "before" if filter_stage == "before" else "after"
    run_dir = results if results is not None else latest_run(DEFAULT_RESULTS)
    with progress_reporter("identifying") as progress:
        report = identify_run(
            run_dir, top_k=top_k, kernel_types=_names(kernel_types), kinds=_names(kinds), filter_stage=stage,
            record_shapes=record_shapes, progress=progress,
        )
    if as_json:
        print_json([k.model_dump(mode="json") for k in report.kernels])
        return
    table = Table(title=f"{report.workload}: top {len(report.kernels)} kernels ({report.results_dir})")
    for column in ("#", "share", "kind", "task", "patchable", "source", "name"):
        table.add_column(column)
    for k in report.kernels:
        table.add_row(str(k.rank), f"{100 * k.device_time_share:.1f}%", k.kind, k.task_id or "-", {True: "yes", False: "no", None: "?"}[k.patchable],
                      k.source or "-", k.name[:60])
    console.print(table)
    for note in report.notes:
        console.print(note)


def _names(value: str | None) -> list[str] | None:
    return [name.strip() for name in value.split(",") if name.strip()] if value else None
