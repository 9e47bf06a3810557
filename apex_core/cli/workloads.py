"""``apex benchmark`` and ``apex workloads``: end-to-end workloads, measured.

``benchmark`` prints one JSON object with --json (a table otherwise) on stdout; progress goes to
stderr. A CV above --max-cv is flagged, and with --fail-on-cv exits 1 after printing the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from apex_core.cli.output import JsonOption, console, print_json, progress_console, progress_reporter
from apex_core.errors import ApexUserError
from apex_core.workloads.runner import DEFAULT_MAX_CV, DEFAULT_MIN_RUN_S, DEFAULT_RUNS, DEFAULT_WARMUP

if TYPE_CHECKING:
    from apex_core.workloads import BenchmarkResult, WorkloadSpec

app = typer.Typer(help="End-to-end workloads: a model, an inference stack and a request mix.", no_args_is_help=True,
                  rich_markup_mode=None)


def register(main_app: typer.Typer) -> None:
    """Add ``apex benchmark`` and ``apex workloads`` to the main command."""
    main_app.command("benchmark")(benchmark_command)
    main_app.add_typer(app, name="workloads")


def _workload_rows(specs: list[WorkloadSpec]) -> list[dict[str, object]]:
    return [{"id": s.id, "model": s.model, "stack": s.stack, "layers": s.layers, "batch": s.batch,
             "prompt_tokens": s.prompt_tokens, "decode_tokens": s.decode_tokens, "dtype": s.dtype, "device": s.device,
             "graphs": s.graphs, "kv_cache": s.kv_cache, "description": s.description} for s in specs]


def _list(as_json: bool) -> None:
    from apex_core.workloads import list_workloads

    specs = list_workloads()
    if as_json:
        print_json(_workload_rows(specs))
        return
    table = Table(title=f"{len(specs)} workloads (layers '-': the model's reduced default)")
    for column in ("id", "model", "stack", "layers", "batch x prompt + decode", "dtype", "device"):
        table.add_column(column)
    for s in specs:
        table.add_row(s.id, s.model, s.stack, str(s.layers or "-"), f"{s.batch} x {s.prompt_tokens} + {s.decode_tokens}",
                      s.dtype, s.device)
    console.print(table)


@app.command("list")
def workloads_list(as_json: JsonOption = False) -> None:
    """List the workloads."""
    _list(as_json)


@app.command("show")
def workloads_show(workload_id: Annotated[str, typer.Argument(help="Workload id, e.g. cpu-mini.")], as_json: JsonOption = False) -> None:
    """Show one workload, resolved for this machine (layers, dtype, device)."""
    from apex_core.workloads import get_workload

    spec = get_workload(workload_id).resolved()
    data = spec.model_dump(mode="json")
    if as_json:
        print_json(data)
        return
    table = Table(title=spec.id, show_header=False)
    for key, value in data.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    console.print(table)


def benchmark_command(
    workload: Annotated[str | None, typer.Option("--workload", help="Workload id (see --list), e.g. cpu-mini.")] = None,
    list_ids: Annotated[bool, typer.Option("--list", help="List the workloads instead.")] = False,
    layers: Annotated[str | None, typer.Option(help="Decoder layers to build: a number, or 'full' for the model's real depth (default: the model's default depth).")] = None,
    kernels: Annotated[str | None, typer.Option(help="Kernel stacks to apply: liger, fla (comma-separated; GPU only).")] = None,
    runs: Annotated[int, typer.Option(help="Measured runs.")] = DEFAULT_RUNS,
    warmup: Annotated[int, typer.Option(help="Unmeasured warm-up request mixes first.")] = DEFAULT_WARMUP,
    min_run_s: Annotated[float, typer.Option("--min-run-s", help="Repeat the request mix until a run lasts this long (0: one mix per run).")] = DEFAULT_MIN_RUN_S,
    batch: Annotated[int | None, typer.Option(help="Sequences per request mix.")] = None,
    prompt_tokens: Annotated[int | None, typer.Option(help="Prompt tokens per sequence.")] = None,
    decode_tokens: Annotated[int | None, typer.Option(help="Decode steps per sequence after the prefill.")] = None,
    dtype: Annotated[str | None, typer.Option(help="auto, bfloat16, float16 or float32.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda or cuda:N.")] = None,
    docker_image: Annotated[str | None, typer.Option(help="vLLM/SGLang workloads: serve from this Docker image.")] = None,
    graphs: Annotated[bool | None, typer.Option("--graphs/--eager", help="Decode replayed from a captured CUDA/HIP graph, or eagerly (default: graphs on a GPU, eager on the CPU).")] = None,
    kv_cache: Annotated[str | None, typer.Option("--kv-cache", help="transformers stack: static (sized for the request mix; graphs need it; the default) or dynamic (eager only).")] = None,
    cache_hours: Annotated[float, typer.Option(help="Reuse a result of the same workload and environment this recent (0: measure).")] = 0.0,
    results_dir: Annotated[Path | None, typer.Option(help="Where results/<run-id>/ go (default: ./results).")] = None,
    max_cv: Annotated[float, typer.Option(help="Flag the result when the runs' coefficient of variation exceeds this.")] = DEFAULT_MAX_CV,
    fail_on_cv: Annotated[bool, typer.Option("--fail-on-cv", help="Exit 1 when the CV exceeds --max-cv.")] = False,
    patched: Annotated[bool, typer.Option("--patched", help="Measure the stack with the patches now in place, on purpose (its results are kept apart from the original's); without it a benchmark refuses while patches are in place.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Benchmark a workload end to end: tokens/s (prefill, decode), latency percentiles, CV, drift."""
    from apex_core.patcher.original import patched_environment, refuse_if_patched
    from apex_core.workloads import benchmark, customize, get_workload
    from apex_core.workloads.runner import check_options

    if list_ids:
        if workload is not None:
            raise ApexUserError("give either --workload ID or --list, not both")
        _list(as_json)
        return
    if workload is None:
        raise ApexUserError("give --workload ID (e.g. --workload cpu-mini), or --list to see the workloads")
    check_options(runs, warmup, cache_hours, max_cv, min_run_s)
    if not patched:
        refuse_if_patched("apex benchmark", how_on_purpose="pass --patched to measure the patched stack on purpose")
    spec = customize(get_workload(workload), layers=layers, batch=batch, prompt_tokens=prompt_tokens,
                     decode_tokens=decode_tokens, dtype=dtype, device=device, kernels=kernels, docker_image=docker_image,
                     graphs=graphs, kv_cache=kv_cache)
    with progress_reporter("benchmark") as progress:
        result = benchmark(spec, runs=runs, warmup=warmup, cache_hours=cache_hours, results_dir=results_dir,
                           max_cv=max_cv, min_run_s=min_run_s, progress=progress,
                           environment_extra=patched_environment() if patched else None)
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        _render(result)
    if result.cv_gate.exceeded:
        progress_console.print(f"cv {100 * (result.cv or 0):.2f}% exceeds --max-cv {100 * max_cv:.2f}%: the runs disagree; "
                               "quiet the machine or add --runs", highlight=False)
        if fail_on_cv:
            raise typer.Exit(1)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _render(result: BenchmarkResult) -> None:
    spec = result.workload
    title = (f"{spec.id}: {spec.stack}, {spec.layers} layers, {spec.dtype} on {spec.device}, "
             f"{spec.batch} x ({spec.prompt_tokens} prompt + {spec.decode_tokens} decode)"
             + (f", kernels {','.join(spec.kernels)}" if spec.kernels else "")
             + (f", decode {result.decode_mode}" if result.decode_mode else ""))
    table = Table(title=title)
    for column in ("run", "mixes", "wall s", "tokens/s", "prefill tok/s", "decode tok/s", "decode p50 ms", "p90", "p99"):
        table.add_column(column, justify="right")
    for run in result.runs:
        step = run.decode_step_ms
        table.add_row(str(run.index + 1), str(run.request_mixes), f"{run.wall_s:.3f}", f"{run.tokens_per_s:,.1f}", f"{run.prefill_tokens_per_s:,.1f}",
                      f"{run.decode_tokens_per_s:,.1f}", _ms(step.p50), _ms(step.p90), _ms(step.p99))
    console.print(table)
    cv = "n/a (one run)" if result.cv is None else f"{100 * result.cv:.2f}%"
    gate = " (above the gate)" if result.cv_gate.exceeded else ""
    lines = [
        (f"tokens/s (median of {len(result.runs)}): {result.tokens_per_s:,.1f}  prefill {result.prefill_tokens_per_s:,.1f}  "
         f"decode {result.decode_tokens_per_s:,.1f}"),
        f"cv: {cv}{gate}, gate {100 * result.cv_gate.threshold:.1f}%",
    ]
    if result.drift is not None:
        flag = "  DRIFT" if result.drift.flagged else ""
        lines.append(f"against {result.drift.previous_run_id}: {100 * result.drift.change:+.2f}%{flag}")
    if result.graph_fallback:
        lines.append(f"graphs fell back to eager decode: {result.graph_fallback}")
    if result.cached:
        lines.append(f"cached: measured {result.created_at}")
    lines += [f"note: {note}" for note in result.notes]
    lines.append(f"timing: {result.timing_method}; results: {Path(result.results_dir) / 'benchmark.json'}")
    for line in lines:
        console.print(line, soft_wrap=True, highlight=False)
