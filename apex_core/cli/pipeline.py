"""``apex run`` and the stage commands that work on a run folder: ``apex optimize``, ``apex score``,
``apex report``, ``apex list-kernels``, and ``apex leaderboard`` over all runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from apex_core.cli.model_options import comma_list, option_name, options_from, settings_from
from apex_core.cli.output import JsonOption, console, print_json
from apex_core.pipeline.config import RunConfig
from apex_core.signatures import parameters_of, with_parameters

ResultsOption = Annotated[Path, typer.Option("--results-dir", help="Results folder: runs go to <dir>/runs/<run-id>.")]
RunOption = Annotated[Optional[Path], typer.Option("--run", help="A run folder (results/runs/<run-id>); default: the newest run.")]


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
    for stage in ("optimize", "score", "report"):
        app.command(stage, help=f"Run the {stage} stage of a pipeline run again (default: the newest run).")(_stage_command(stage))
    app.command("list-kernels")(list_kernels_command)
    app.command("leaderboard")(leaderboard_command)
    app.command("export-rl")(export_rl_command)
    app.command("knowledge")(knowledge_command)
    app.command("optimize-kernel")(optimize_kernel_command)


RUN_SETTINGS = tuple(name for name in RunConfig.model_fields if name != "tasks")
"""``apex run``'s settings: every field of ``RunConfig`` but the task list ``optimize-kernel`` fills."""
KERNEL_SETTINGS = ("iterations", "max_turns", "score_threshold", "agent", "agent_model", "agent_timeout_s", "replay_from",
                   "gpu", "leaderboard", "executor", "ray_address")
"""``apex optimize-kernel``'s: the agent loop's, without a workload's benchmark, identify or integration."""


def _run_config(**settings: object) -> RunConfig:
    """The run's settings from the command's options; a bad one is a one-line error naming its option."""
    from pydantic import ValidationError

    from apex_core.errors import ApexUserError

    try:
        return RunConfig(**settings_from(RunConfig, settings))
    except ValidationError as error:
        first = error.errors()[0]
        where = option_name(str(first["loc"][0]))
        raise ApexUserError(f"{where}: {first['msg']}" + (f" (got {first['input']!r})" if first["type"] == "literal_error" else "")) from None


def _run_options(
    results_dir: ResultsOption = Path("results"),
    resume: Annotated[Optional[str], typer.Option(help="Go on with a run: its folder, or 'latest'.")] = None,
    stage: Annotated[Optional[str], typer.Option(help="Run only these stages (comma-separated), again if done.")] = None,
    as_json: JsonOption = False,
) -> None:
    """``apex run``'s own options, beside the run's settings."""


@with_parameters(options_from(RunConfig, RUN_SETTINGS, defaults={"workload": None}) + parameters_of(_run_options))
def run_command(**options: Any) -> None:
    """The whole pipeline: benchmark, identify, optimize, grade, integrate, benchmark-final, score, report.

    State is kept in results/runs/<run-id>/state.json: --resume goes on where a run stopped.

    Examples: apex run --workload cpu-mini;  apex run --workload llama-3-1-8b-instruct --kernels liger --languages triton
    --agent claude;  apex run --resume latest"""
    from apex_core.errors import ApexUserError
    from apex_core.pipeline.runner import run_pipeline
    from apex_core.pipeline.state import latest_run

    results_dir, resume, stage, as_json = (options.pop(name) for name in ("results_dir", "resume", "stage", "as_json"))
    config = None
    resume_dir = None
    if resume is not None:
        resume_dir = latest_run(results_dir, options["workload"]).folder if resume == "latest" else Path(resume)
    else:
        if options["workload"] is None:
            raise ApexUserError("give --workload ID (e.g. cpu-mini) to start a run, or --resume RUN_DIR|latest")
        config = _run_config(**options)
    from apex_core.cli.live_run import live_run

    with live_run("run") as (progress, on_save):
        state = run_pipeline(config, results_dir, resume=resume_dir, only=comma_list(stage) or None, progress=progress,
                             on_save=on_save)
    _show(state, as_json)


def _show(state, as_json: bool) -> None:  # noqa: ANN001 - RunState, imported lazily
    if as_json:
        print_json(state.model_dump(mode="json"))
        return
    show_state(state)


def show_state(state) -> None:  # noqa: ANN001 - RunState, imported lazily
    """A run's stages as a table, its folder and reports."""
    console.print(f"run {state.run_id}  ({state.folder})", highlight=False)
    for name, record in state.stages.items():
        detail = record.error or record.summary
        took = f" {record.elapsed_s:.1f} s" if record.elapsed_s is not None else ""
        console.print(f"  {name:<16} {record.status:<8}{took}  {detail}", highlight=False)
    for path in state.reports:
        console.print(f"report: {path}", highlight=False)


def _stage_command(stage: str):  # noqa: ANN202
    def command(run: RunOption = None, results_dir: ResultsOption = Path("results"), as_json: JsonOption = False) -> None:
        from apex_core.pipeline.runner import run_pipeline
        from apex_core.pipeline.state import latest_run

        from apex_core.cli.live_run import live_run

        folder = run or latest_run(results_dir).folder
        with live_run(stage) as (progress, on_save):
            state = run_pipeline(None, results_dir, resume=folder, only=(stage,), progress=progress, on_save=on_save)
        _show(state, as_json)

    command.__name__ = f"{stage}_command"
    return command


def list_kernels_command(run: RunOption = None, results_dir: ResultsOption = Path("results"), as_json: JsonOption = False) -> None:
    """The kernels a run chose to optimize, with what became of each."""
    from apex_core.pipeline.state import latest_run, load_run

    state = load_run(run) if run else latest_run(results_dir)
    if as_json:
        print_json([k.model_dump(mode="json", exclude={"iterations"}) for k in state.kernels])
        return
    if not state.kernels:
        console.print(f"run {state.run_id}: no kernel chosen ({state.stages['identify'].summary or state.stages['identify'].status})")
    for k in state.kernels:
        final = f"{k.final.outcome} {k.final.speedup or 0:.3f}x score {k.final.score:.0f}" if k.final else "not graded"
        console.print(f"#{k.rank} {k.task_id}  {k.device_time_share:.1%}  {k.kernel_name[:60]}  iterations {len(k.iterations)}  "
                      f"{final}  {'integrated' if k.integrated else k.integration_note or '-'}", highlight=False)


def leaderboard_command(
    results_dir: ResultsOption = Path("results"),
    task: Annotated[Optional[str], typer.Option(help="Only this task's rows.")] = None,
    agent: Annotated[Optional[str], typer.Option(help="Only this agent's rows.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Every optimized kernel of every run under the results folder, best first, and the standings per agent."""
    from apex_core.pipeline.leaderboard import LEADERBOARD_FILE, Leaderboard

    if not (results_dir / LEADERBOARD_FILE).is_file():
        from apex_core.errors import ApexUserError

        raise ApexUserError(f"no leaderboard in {results_dir}: 'apex run --workload ID' adds to it (without --no-leaderboard)")
    board = Leaderboard(results_dir)
    entries, standings = board.entries(task, agent), board.standings()
    if agent is not None:
        known = sorted({s.agent for s in standings})
        if agent not in known:
            from apex_core.errors import ApexUserError

            raise ApexUserError(f"--agent {agent!r}: no entry of that agent in {results_dir / LEADERBOARD_FILE}; "
                                f"its agents: {', '.join(known) or 'none yet'}")
        standings = [s for s in standings if s.agent == agent]
    if as_json:
        print_json({"entries": entries, "standings": [s.model_dump() for s in standings]})
        return
    for s in standings:
        score = f"{s.mean_normalized_score:.3f}" if s.mean_normalized_score is not None else "-"
        console.print(f"{s.agent} {s.model} {s.version}: {s.kernels} kernel(s) in {s.runs} run(s), mean normalized score {score}",
                      highlight=False)
    for e in entries:
        console.print(f"  {e['task_id']}  {e['agent']} {e['model']}  {e['outcome']}  {e['speedup'] or 0:.3f}x  "
                      f"score {e['kernel_score'] or 0:.0f}  reward {e['model_reward'] if e['model_reward'] is not None else '-'}  "
                      f"run {e['run_id']}", highlight=False)


def export_rl_command(
    output: Annotated[Path, typer.Option("--output", help="Folder for tasks, steps, sft and metadata.json.")],
    results_dir: ResultsOption = Path("results"),
    sft: Annotated[bool, typer.Option("--sft", help="Also write prompt -> solution pairs of correct solutions.")] = False,
    min_score: Annotated[float, typer.Option(help="SFT pairs need at least this normalized kernel score (0-1).")] = 0.0,
    format: Annotated[str, typer.Option("--format", help="jsonl or parquet (both load with Hugging Face datasets).")] = "jsonl",
    as_json: JsonOption = False,
) -> None:
    """Every run's tasks, trajectory steps and (with --sft) SFT pairs, as datasets with their provenance."""
    from apex_core.pipeline.export_rl import export_rl

    summary = export_rl(results_dir, output, sft=sft, min_score=min_score, fmt=format)  # type: ignore[arg-type]
    if as_json:
        print_json(summary.model_dump())
        return
    for name, path in summary.files.items():
        console.print(f"{name}: {summary.rows[name]} rows in {path}", highlight=False)
    console.print(f"from {len(summary.runs)} run(s); provenance in {Path(summary.output) / 'metadata.json'}", highlight=False)


def knowledge_command(
    task: Annotated[Optional[str], typer.Option(help="A task id (apex tasks list): the past gradings its prompts quote.")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="The target (default: this machine's).")] = None,
    as_json: JsonOption = False,
) -> None:
    """What past gradings on this machine measured: per task, language and target, or one task's records as its prompts quote them."""
    from apex_core.pipeline.knowledge import KnowledgeBase, records_of

    base = KnowledgeBase()
    if task is None:
        records = base.overview()
        if as_json:
            print_json({"path": str(base.path), "tasks": [r.model_dump() for r in records]})
            return
        if not records:
            console.print(f"no gradings yet in {base.path}: 'apex run' records every graded iteration", highlight=False)
        for r in records:
            best = (f"{r.best_speedup:.2f}x ({','.join(r.best_strategies) or 'no named strategy'})" if r.best_speedup
                    else "not timed (correctness only)" if r.correct else "none correct")
            console.print(f"{r.task_id} ({r.language}) on {r.target}: {r.experiments} gradings, {r.correct} correct, best {best}",
                          highlight=False)
        return
    from apex_core.tasks import get_task

    chosen = get_task(task)  # an unknown id is a one-line error naming the known ones
    target = records_of(chosen, gpu)
    past = base.insights(chosen.id, chosen.language, target)
    if as_json:
        print_json({"task_id": chosen.id, "language": chosen.language, "target": target,
                    "past_gradings": [p.model_dump(mode="json") for p in past]})
        return
    if not past:
        console.print(f"nothing recorded yet for {chosen.id} ({chosen.language}) on {target}", highlight=False)
    for p in past:
        figures = f"{p.speedup:.3f}x, score {p.score:.0f}" if p.speedup is not None else f"score {p.score:.0f}"
        extra = [f"error {p.error_class}" if p.error_class else "", f"failed at {p.failed_shape}" if p.failed_shape else "",
                 "failed at a hidden shape" if p.failed_on_hidden_shape else "", ",".join(p.strategies),
                 f"flags {','.join(p.flags)}" if p.flags else ""]
        console.print(f"{p.graded_on}  {p.outcome.value}  {figures}  " + "  ".join(e for e in extra if e), highlight=False)


def _kernel_options(
    task: Annotated[str, typer.Option("--task", help="The task to optimize (apex tasks list; apex tasks new makes one for any kernel).")],
    results_dir: ResultsOption = Path("results"),
    as_json: JsonOption = False,
) -> None:
    """``apex optimize-kernel``'s own options, beside the agent loop's settings."""


@with_parameters(parameters_of(_kernel_options)[:1] + options_from(RunConfig, KERNEL_SETTINGS) + parameters_of(_kernel_options)[1:])
def optimize_kernel_command(**options: Any) -> None:
    """The agent loop on one task, without a workload: iterations, a fresh grading of the best solution, score, report.

    Examples: apex optimize-kernel --task cpu-mini__rms_norm;  apex optimize-kernel --task cpu-mini__rms_norm --agent codex
    --iterations 5"""
    from apex_core.cli.live_run import live_run
    from apex_core.pipeline.runner import run_pipeline

    task, results_dir, as_json = (options.pop(name) for name in ("task", "results_dir", "as_json"))
    config = _run_config(workload=task, tasks=(task,), **options)
    with live_run("optimize-kernel") as (progress, on_save):
        state = run_pipeline(config, results_dir, progress=progress, on_save=on_save)
    _show(state, as_json)
