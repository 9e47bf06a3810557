"""The ``apex`` command line: one entry point for every stage, for people, scripts and agents.

User mistakes (an unknown task id, a missing solution file, an unknown GPU) end with exit code 2
and one line that says what is wrong and what would be right; never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from apex_core.cli import render
from apex_core.cli.analysis import register as register_analysis
from apex_core.cli.docs import register as register_docs
from apex_core.cli.env import register as register_env
from apex_core.cli.examples import add_examples
from apex_core.cli.executor_options import ExecutorOption, RayAddressOption
from apex_core.cli.patch import register as register_patch
from apex_core.cli.pipeline import register as register_pipeline
from apex_core.cli.runs import register as register_runs
from apex_core.cli.source import register as register_source
from apex_core.cli.mcp import app as mcp_app
from apex_core.cli.output import JsonOption, console, progress_console, progress_reporter
from apex_core.cli.output import print_json as _print_json
from apex_core.cli.workloads import register as register_workloads
from apex_core.errors import ApexUserError, NotFoundError

if TYPE_CHECKING:  # for annotations only
    from apex_core.hardware.measured import MeasuredRates
    from apex_core.suite.verify import TaskVerification

app = typer.Typer(
    name="apex",
    help="Apex: an RL environment and tool suite in which LLM agents optimize GPU kernels.",
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # every subcommand inherits -h
)


def _print_version(asked: bool) -> None:
    if asked:
        import platform

        from apex_core import __version__

        typer.echo(f"apex {__version__} (python {platform.python_version()})")
        raise typer.Exit()


@app.callback()
def _apex(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="Print Apex's version and exit.")] = False) -> None:
    """Apex: an RL environment and tool suite in which LLM agents optimize GPU kernels."""


tasks_app = typer.Typer(help="List and inspect the kernel tasks.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(tasks_app, name="tasks")
app.add_typer(mcp_app, name="mcp")
register_workloads(app)
register_analysis(app)
register_docs(app)
register_env(app)
register_source(app)
register_patch(app)
register_pipeline(app)
register_runs(app)

GpuOption = Annotated[
    Optional[str],
    typer.Option("--gpu", help="Target arch or product (gfx950, gfx942, sm_90, mi355x, h200, ...); default: detected, else gfx950."),
]
@app.command()
def hardware(gpu: GpuOption = None, as_json: JsonOption = False) -> None:
    """Show the detected accelerator and the target's peak numbers with their sources."""
    from apex_core.hardware import resolve_target

    target = resolve_target(gpu)
    if as_json:
        spec = target.spec
        _print_json(
            {
                "detected": target.detected.model_dump(),
                "target": {
                    "origin": target.origin,
                    "arch": target.arch,
                    "spec": spec.model_dump() if spec else None,
                    "last_level_cache_bytes": spec.last_level_cache_bytes if spec else None,
                    "cache_flush_bytes": spec.cache_flush_bytes if spec else None,
                },
            }
        )
        return
    render.hardware(console, target)


@tasks_app.command("list")
def tasks_list(
    model: Annotated[Optional[str], typer.Option(help="Only this model (slug or Hugging Face id).")] = None,
    kernel: Annotated[Optional[str], typer.Option(help="Only this kernel (rms_norm, ...).")] = None,
    as_json: JsonOption = False,
) -> None:
    """List tasks, optionally filtered by model and kernel."""
    from apex_core.tasks import find_tasks

    tasks = find_tasks(model=model, kernel=kernel)
    if as_json:
        _print_json([{"id": t.id, "model": t.model, "also_models": list(t.also_models), "kernel": t.kernel, "language": t.language, "dtype": t.dtype,
                      "difficulty": t.difficulty} for t in tasks])
        return
    render.task_list(console, tasks)


@tasks_app.command("show")
def tasks_show(task_id: Annotated[str, typer.Argument(help="Task id, e.g. llama-3-1-8b-instruct__rms_norm.")],
               gpu: GpuOption = None, as_json: JsonOption = False) -> None:
    """Show one task: contract, shapes, tolerance, roofline and where the solution goes."""
    from apex_core.hardware import resolve_target
    from apex_core.tasks import get_task

    task = get_task(task_id)
    if as_json:
        data = task.model_dump(exclude={"hidden_shapes"})
        data["hidden_shape_count"] = len(task.hidden_shapes)
        data["solution_path"] = f"output/{task.id}/{task.solution_filename}"
        _print_json(data)
        return
    render.task_detail(console, task, resolve_target(gpu))


@tasks_app.command("new")
def tasks_new(
    model: Annotated[str, typer.Option("--model", help="A model of the registry (slug or Hugging Face id).")],
    kernel: Annotated[str, typer.Option("--kernel", help="A kernel that has a defaults file (rms_norm, gemm_bf16, ...).")],
    directory: Annotated[Optional[Path], typer.Option("--dir", help="Write the definition here (default: the shipped definitions).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Write it again when this folder already has it.")] = False,
) -> None:
    """Scaffold a task of an existing kernel for a model: a definition that loads, and what to fill in."""
    from apex_core.tasks.scaffold import scaffold_task

    made = scaffold_task(model, kernel, directory, force)
    lines = [f"wrote {made.path} (task {made.task_id})", f"defaults: {made.defaults}"]
    if made.solution is not None:
        lines.append(f"our solution that applies: {made.solution}")
    lines += ["next:", *(f"  {number}. {step}" for number, step in enumerate(made.to_do, 1))]
    for line in lines:
        console.print(line, soft_wrap=True)  # paths whole, never broken across lines


@tasks_app.command("verify")
def tasks_verify(
    task_ids: Annotated[Optional[list[str]], typer.Option("--task", help="Verify this task (repeatable).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Verify every task.")] = False,
    shard: Annotated[Optional[str], typer.Option(help="Only share I of N of the tasks, as I/N (one process per GPU).")] = None,
    device: Annotated[Optional[str], typer.Option(help="GPU index (0, 1, ...) or cuda:N; default GPU 0.")] = None,
    jsonl: Annotated[Optional[Path], typer.Option(help="Also append each task's verdict to this file as it finishes.")] = None,
    timing: Annotated[bool, typer.Option("--timing/--no-timing", help="Time the reference solution (GPU only); "
                                         "--no-timing checks correctness only and also fills the compile caches.")] = True,
    gpus: Annotated[int, typer.Option(help="Spread the tasks over this many GPUs, one process each (0: all visible).")] = 1,
    resume: Annotated[bool, typer.Option(help="Skip the tasks that already have a verdict in the --jsonl file.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Baseline correct, reference solution correct and faster, signal and roofline sane (GPU: timed)."""
    from apex_core.grader import GradeOptions
    from apex_core.tasks import all_tasks, get_task
    from apex_core.suite.verify import verify_task
    from apex_core.suite.verify_runs import append_verdict, read_verdicts, verify_on_devices

    if bool(task_ids) == every:
        raise ApexUserError("give exactly one of --task ID or --all")
    device_name = _device_name(device)
    if gpus == 1 and device_name not in (None, "cpu"):
        from apex_core.grader import require_device

        require_device(device_name)  # before any task runs: CPU tasks would never notice a missing GPU
    if resume and jsonl is None:
        raise ApexUserError("--resume reads the verdicts of an earlier run: give the same --jsonl FILE")
    if jsonl is not None:
        _check_output_file(jsonl, "--jsonl", "verify.jsonl")
    tasks = sorted(all_tasks().values(), key=lambda t: t.id) if every else [get_task(t) for t in task_ids or []]
    if shard is not None:
        tasks = tasks[_shard_slice(shard, len(tasks))]
    if resume and jsonl is not None:
        done = read_verdicts(jsonl)
        for task in (t for t in tasks if t.id in done):
            progress_console.print(f"{task.id}: verdict already in {jsonl}, skipped")
        tasks = [t for t in tasks if t.id not in done]
    if gpus != 1:
        devices = _all_gpus(gpus, device)
        sink = jsonl
        if sink is None:
            descriptor, name = tempfile.mkstemp(prefix="apex-verify-", suffix=".jsonl")
            os.close(descriptor)
            sink = Path(name)
        found = verify_on_devices(tasks, devices, sink, timing)
        results = [found[t.id] for t in tasks if t.id in found]
        missing = [t.id for t in tasks if t.id not in found]
        if missing:
            progress_console.print(f"no verdict for {', '.join(missing)} (a verifying process ended early)")
        # No rates measured here: the children are timing on these GPUs (each verdict has its fractions).
        _report_verification(results, None, as_json, timed=timing)
        if missing or any(not r.passed for r in results):
            raise typer.Exit(1)
        return
    on_gpu, spec, rates = _gpu_context(device_name or "cuda")
    options = GradeOptions(warm_pool=True, device=device_name, timing=timing)
    results = []
    for task in tasks:
        if task.needs_gpu and not on_gpu and task.language != "triton":
            progress_console.print(f"{task.id}: skipped (a {task.language} task needs a GPU toolchain)")
            continue
        # CPU tasks are checked on the CPU whatever GPU the other tasks use.
        task_options = options if task.needs_gpu else options.model_copy(update={"device": None})
        result = verify_task(task, on_gpu, spec, rates, task_options, progress=lambda m: progress_console.print(m, style="dim"))
        if jsonl is not None:
            append_verdict(jsonl, result)
        speed = f", {result.speedup:.3f}x" if result.speedup else ""
        progress_console.print(f"{task.id}: {'verified' if result.passed else 'FAILED: ' + '; '.join(result.problems)}{speed}")
        results.append(result)
    _report_verification(results, rates, as_json, timed=on_gpu)
    if any(not r.passed for r in results):
        raise typer.Exit(1)


def _report_verification(results: list[TaskVerification], rates: MeasuredRates | None, as_json: bool, timed: bool) -> None:
    if as_json:
        _print_json({"timed": timed, "measured": rates.model_dump() if rates else None, "tasks": [r.model_dump() for r in results]})
    else:
        render.verification(console, results, rates)


def _all_gpus(count: int, device: str | None) -> list[str]:
    """The devices of a spread verification: GPUs 0..count-1 (count 0: every visible GPU)."""
    import torch

    if device is not None:
        raise ApexUserError("give either --device N (one GPU) or --gpus N (several), not both")
    if count < 0:
        raise ApexUserError(f"--gpus {count} is not a number of GPUs; give 2 or more, 0 for every visible GPU, or leave --gpus out")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible == 0:
        raise ApexUserError(f"--gpus {count}: no GPU is visible here; leave --gpus out to verify on this machine alone")
    if count > visible:
        raise ApexUserError(f"--gpus {count}: only {visible} GPU(s) are visible; give at most {visible}, 0 for all of them, "
                            "or leave --gpus out")
    return [f"cuda:{i}" for i in range(count or visible)]


def _shard_slice(shard: str, count: int) -> slice:
    """Tasks i, i+n, i+2n, ... of share 'i/n' (1-based), so expensive families spread evenly."""
    index, _, total = shard.partition("/")
    if not (index.isdigit() and total.isdigit() and 1 <= int(index) <= int(total)):
        raise ApexUserError(f"--shard {shard!r} is not I/N with 1 <= I <= N, e.g. --shard 1/2")
    return slice(int(index) - 1, count, int(total))


def _gpu_context(device: str):
    """Whether a GPU is here, its spec from the hardware model, and its measured rates."""
    import torch

    if not torch.cuda.is_available() or device == "cpu":
        return False, None, None
    from apex_core.hardware import resolve_target
    from apex_core.hardware.measured import measured_rates

    return True, resolve_target(None).spec, measured_rates(device)


@tasks_app.command("export")
def tasks_export(
    output_format: Annotated[str, typer.Option("--format", help="jsonl (one task per line).")] = "jsonl",
    with_solutions: Annotated[bool, typer.Option("--with-solutions", help="Include our reference solutions (SFT targets).")] = False,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    gpu: GpuOption = None,
) -> None:
    """Export every task for RL/SFT frameworks: prompts, baseline, reference, shapes, metadata."""
    from apex_core.hardware import resolve_target
    from apex_core.tasks import all_tasks
    from apex_core.suite.export import export_records

    if output_format != "jsonl":
        raise ApexUserError(f"unknown export format {output_format!r}; the supported format is jsonl")
    if output is not None:
        _check_output_file(output)
    lines = [r.model_dump_json() + "\n" for r in export_records(list(all_tasks().values()), resolve_target(gpu), with_solutions)]
    if output is None:
        sys.stdout.write("".join(lines))
    else:
        try:
            output.write_text("".join(lines), encoding="utf-8")
        except OSError as error:
            raise ApexUserError(f"--output {output}: cannot write there ({error.strerror}); give a file in a folder you can write") from None
        console.print(f"wrote {len(lines)} tasks to {output}")


def _check_output_file(output: Path, option: str = "--output", example: str = "tasks.jsonl") -> None:
    """A file a command can create, replace or append to: not a folder, in a folder that exists,
    checked before the work whose results it keeps."""
    if output.is_dir():
        raise ApexUserError(f"{option} {output} is a folder; give a file to write, e.g. {option} {output / example}")
    folder = output.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ApexUserError(f"{option} {output}: the folder {folder} {what}; create it first (mkdir -p {folder}) or write elsewhere")
    if not os.access(folder, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise ApexUserError(f"{option} {output}: you cannot write there; give a file in a folder you can write")


@app.command()
def prompt(
    task_id: Annotated[Optional[str], typer.Option("--task-id", help="Print the prompt of this task.")] = None,
    list_ids: Annotated[bool, typer.Option("--list", help="List every task id.")] = False,
    every: Annotated[bool, typer.Option("--all", help="Every task's prompt as JSON lines.")] = False,
    gpu: GpuOption = None,
    output_dir: Annotated[str, typer.Option(help="Where solutions are written, as the prompt states it.")] = "output",
    system: Annotated[bool, typer.Option("--system/--no-system", help="Include the system prompt (text output).")] = True,
) -> None:
    """Print task prompts: one (--task-id), the id list (--list), or all as JSONL (--all)."""
    from apex_core.hardware import resolve_target
    from apex_core.prompts import build_record, system_prompt, task_prompt
    from apex_core.tasks import all_tasks, get_task

    if sum([task_id is not None, list_ids, every]) != 1:
        raise ApexUserError("give exactly one of --task-id ID, --list or --all")
    if list_ids:
        for tid in sorted(all_tasks()):
            sys.stdout.write(tid + "\n")
        return
    target = resolve_target(gpu)
    if every:
        for task in sorted(all_tasks().values(), key=lambda t: t.id):
            sys.stdout.write(build_record(task, target, output_dir).model_dump_json() + "\n")
        return
    task = get_task(task_id or "")
    if system:
        sys.stdout.write(system_prompt(target) + "\n---\n\n")
    sys.stdout.write(task_prompt(task, target, output_dir))


@app.command()
def grade(
    task: Annotated[str, typer.Option("--task", help="Task id.")],
    solution: Annotated[list[Path], typer.Option("--solution", help="Solution file(s) or folder(s) of them: --solution a.py b.py "
                                                 "candidates/ ... (several: a summary table, best score first)")],
    more: Annotated[Optional[list[Path]], typer.Argument(help="More solution files or folders.", show_default=False)] = None,
    as_json: JsonOption = False,
    timeout: Annotated[float, typer.Option(help="Seconds any single step of a solution may take (above 0, at most 3600).")] = 180.0,
    device: Annotated[Optional[str], typer.Option(help="GPU index (0, 1, ...), cuda:N or cpu; default: GPU 0 if the task needs one.")] = None,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="Check correctness only.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Grade again even if this exact solution was graded here before.")] = False,
    backend: Annotated[str, typer.Option(help="Who times: apex (built in) or magpie (an installed Magpie at MAGPIE_ROOT).")] = "apex",
    unconfined: Annotated[bool, typer.Option("--unconfined", help="Run solutions with your own rights where they cannot be confined (recorded in the result).")] = False,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="With --executor ray: grade GPU tasks on nodes of this arch or "
                                               "product (gfx950, sm_90, mi355x, h200, ...); default: any GPU.")] = None,
) -> None:
    """Grade solution files out of process: compile, correctness on all shapes, interleaved timing, score.
    A folder stands for its solution files of the task's language (a batch of candidates)."""
    from apex_core.grader import MAX_STEP_TIMEOUT_S, GradeOptions, grade_solutions, solution_paths
    from apex_core.tasks import get_task

    paths = solution_paths(get_task(task), [*solution, *(more or [])])
    if executor not in ("local", "ray"):
        raise ApexUserError(f"unknown --executor {executor!r}; use local or ray")
    if executor == "local" and (ray_address or gpu):
        raise ApexUserError(f"{'--ray-address' if ray_address else '--gpu'} places gradings on a Ray cluster; "
                            "add --executor ray, or leave it out to grade on this machine")
    if backend not in ("apex", "magpie"):
        raise ApexUserError(f"unknown --backend {backend!r}; use apex or magpie")
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_STEP_TIMEOUT_S):
        raise ApexUserError(f"--timeout {timeout:g} is not a number of seconds above 0 and at most {MAX_STEP_TIMEOUT_S:g}; "
                            "e.g. --timeout 180 (the default)")
    # A one-shot command grading one file gains nothing from keeping workers warm for later.
    options = GradeOptions(
        timeout_s=timeout, device=_device_name(device), timing=not no_timing, warm_pool=len(paths) > 1, backend=backend,
        unconfined=unconfined,
    )
    if executor == "ray":
        _grade_on_ray(task, paths, options.model_copy(update={"warm_pool": True}), not no_cache, ray_address, gpu, as_json)
        return
    with progress_reporter("grading") as progress:
        results = grade_solutions(task, paths, options, use_cache=not no_cache, progress=progress)
    if as_json:
        _print_json([r.model_dump(mode="json") for r in results])
        return
    for number, result in enumerate(results, start=1):
        render.grade_result(console, result, f"Grade {number} of {len(results)}: {Path(result.solution_path).name}"
                            if len(results) > 1 else None)
    if len(results) > 1:
        render.grade_summary(console, results)


def _grade_on_ray(task: str, paths: list[Path], options, use_cache: bool, address: str | None, gpu: str | None,  # noqa: ANN001
                  as_json: bool) -> None:
    """``apex grade --executor ray``: the same results, each with where it was graded."""
    from apex_core.executors import grade_files, make_executor

    with progress_reporter("grading on Ray") as progress:
        with make_executor("ray", address) as ray_executor:
            graded = grade_files(ray_executor, task, paths, {"options": options, "target": gpu, "use_cache": use_cache},
                                 progress)
    if as_json:
        _print_json([{**g.result.model_dump(mode="json"), "placement": g.placement.model_dump()} for g in graded])
        return
    for one in graded:
        render.grade_result(console, one.result)
        where = one.placement
        console.print(f"graded on {where.host} by {where.actor} (node {where.node[:12]}, attempt {where.attempts})"
                      if where.attempts else "answered from this driver's cache", highlight=False)
    if len(graded) > 1:
        render.grade_summary(console, [one.result for one in graded])


def _device_name(device: str | None) -> str | None:
    from apex_core.grader import device_from_option

    return device_from_option(device)


@app.command("eval")
def evaluate(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Submit a stored solution instead of calling an agent.")] = False,
    task_id: Annotated[str, typer.Option("--task-id", help="Task to evaluate.")] = "cpu-mini__rms_norm",
    agent: Annotated[str, typer.Option(help="Agent backend when not --dry-run: claude.")] = "claude",
    agent_model: Annotated[Optional[str], typer.Option(help="Model name passed to the agent CLI.")] = None,
    max_turns: Annotated[int, typer.Option(min=1, help="Agent turn limit.")] = 25,
    output_dir: Annotated[Path, typer.Option(help="Where output/<task_id>/ goes.")] = Path("output"),
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="With --dry-run: replace a solution file there that differs from the stored one.")] = False,
    gpu: GpuOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the mini-evaluation: prompt, agent, solution, grade, score report."""
    from apex_core.agents import make_agent
    from apex_core.evaluation import run_eval

    backend = make_agent("dry-run" if dry_run else agent, model=agent_model, max_turns=max_turns, overwrite=overwrite)
    with console.status(f"evaluating {task_id} with the {backend.name} agent", spinner="dots") if not as_json else contextlib.nullcontext():
        report = run_eval(backend, task_id=task_id, output_dir=output_dir, gpu=gpu)
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    render.eval_report(console, report)


def _recover_patches() -> None:
    """Undo what a killed patcher left open in this environment, before anything else runs; not
    where this process may not write the environment (an agent's confined session, where it is
    read-only, or another user's), which only its owner can mend."""
    from apex_core.patcher import RecoveryError, recover

    try:
        rolled = recover()
    except OSError as error:
        if error.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        return
    except RecoveryError as error:
        # One line, and the command goes on: only what patches is refused (a Patcher will not open),
        # so apex tasks list, status and the rest keep working while the environment waits for its owner.
        sys.stderr.write(f"apex: warning: {error}\n")
        return
    if rolled:
        sys.stderr.write(f"apex: rolled back {len(rolled)} patch(es) an interrupted run left open ({', '.join(rolled)})\n")


_USERS_TO_FIX = frozenset({errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                           errno.ENOTDIR, errno.EISDIR})
"""Errors of the file system a user's choice of path or machine causes: one line, not a traceback."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point with Apex's error discipline."""
    try:
        _recover_patches()
        result = app(args=argv, prog_name="apex", standalone_mode=False)
    except NotFoundError as error:  # nothing found: 1, as grep; a mistake is 2
        sys.stderr.write(f"apex: {error}\n")
        sys.exit(1)
    except ApexUserError as error:
        sys.stderr.write(f"apex: error: {error}\n")
        sys.exit(2)
    except OSError as error:
        if error.errno not in _USERS_TO_FIX or os.environ.get("APEX_DEBUG") == "1":
            raise
        where = f": {error.filename}" if error.filename else ""
        sys.stderr.write(f"apex: error: {error.strerror}{where}; choose a path you can write (a folder you own, "
                         f"shorter names), or free space, and run it again (APEX_DEBUG=1 shows where it happened)\n")
        sys.exit(2)
    except typer.Abort:  # end of input at a prompt
        _interrupted(argv)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.TyperException as error:  # usage errors: unknown option, missing value, bad type
        # 'apex' or 'apex tasks' alone: the help, exit 0 (by name: typer ships its own copy of click)
        if type(error).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(error.format_message() + "\n")
            sys.exit(0)
        context = getattr(error, "ctx", None)
        hint = f" (see '{context.command_path} --help')" if context is not None else ""
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        sys.stderr.write(f"apex: error: {message}{hint}\n")
        sys.exit(2)
    if result == 130:  # typer turns Ctrl-C into exit code 130, silently
        _interrupted(argv)
    sys.exit(result if isinstance(result, int) else 0)


def _interrupted(argv: list[str] | None) -> NoReturn:
    """One line on Ctrl-C, and for a run the way to go on (its state is saved after every step)."""
    command = (sys.argv[1:] if argv is None else argv)[:1]
    resume = " (go on with 'apex run --resume latest')" if command == ["run"] else ""
    sys.stderr.write(f"apex: interrupted{resume}\n")
    sys.exit(130)



@app.command("doctor")
def doctor_command(
    results_dir: Annotated[Path, typer.Option("--results-dir", help="The results folder whose rights are checked.")] = Path("results"),
    as_json: JsonOption = False,
) -> None:
    """What this installation can and cannot do: torch's build and the GPU, Triton, confinement of agent code, the
    agent CLIs and their logins, the docs index, leftover patches, writable folders; each finding with its fix, and the
    versions a bug report needs. Exit code 1 when a check fails.

    Example: apex doctor --json > doctor.json"""
    from apex_core.doctor import diagnose

    diagnosis = diagnose(results_dir)
    if as_json:
        _print_json({**diagnosis.model_dump(mode="json"), "failed": diagnosis.failed})
    else:
        for check in diagnosis.checks:
            console.print(f"{check.status:<5} {check.name:<24} {check.detail}", highlight=False, soft_wrap=True)
            if check.fix and check.status != "ok":
                console.print(f"{'':<30}fix: {check.fix}", highlight=False, soft_wrap=True)
        versions = ", ".join(f"{name} {version}" for name, version in diagnosis.versions.items())
        console.print(f"versions: {versions}", highlight=False, soft_wrap=True)
    if diagnosis.failed:
        raise typer.Exit(1)


add_examples(app)  # last: after every command is registered

if __name__ == "__main__":
    main()
