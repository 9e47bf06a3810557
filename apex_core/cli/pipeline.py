"""``apex run`` and the stage commands that work on a run folder: ``apex optimize``, ``apex score``,
``apex report``, ``apex list-kernels``, and ``apex leaderboard`` over all runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from apex_core.cli.executor_options import ExecutorOption, RayAddressOption
from apex_core.cli.output import JsonOption, console, print_json

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


def _run_config(**settings: object):  # noqa: ANN202 - a RunConfig, imported lazily
    """The run's settings from the command's options; a bad one is a one-line error naming its option."""
    from pydantic import ValidationError

    from apex_core.errors import ApexUserError
    from apex_core.pipeline.config import RunConfig

    try:
        return RunConfig(**settings)
    except ValidationError as error:
        first = error.errors()[0]
        raise ApexUserError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip()) if value else ()


def run_command(
    workload: Annotated[Optional[str], typer.Option("--workload", help="The workload, e.g. cpu-mini, llama-3-1-8b-instruct.")] = None,
    kernels: Annotated[Optional[str], typer.Option(help="Kernel stacks for the workload, e.g. liger or fla.")] = None,
    layers: Annotated[Optional[int], typer.Option(help="Decoder layers to build (default: the model's reduced default).")] = None,
    top_k: Annotated[int, typer.Option(help="Bottleneck kernels to optimize.")] = 3,
    kernel_types: Annotated[str, typer.Option(help="Task languages to optimize: triton, hip, python or all.")] = "all",
    iterations: Annotated[int, typer.Option(help="Agent iterations per kernel.")] = 3,
    max_turns: Annotated[int, typer.Option(help="Agent turns per iteration.")] = 25,
    score_threshold: Annotated[float, typer.Option(help="A kernel score that ends a kernel's iterations early.")] = 300.0,
    agent: Annotated[str, typer.Option(help="Agent backend: replay (offline, no login), claude, codex or cursor.")] = "replay",
    agent_model: Annotated[Optional[str], typer.Option(help="The agent's model.")] = None,
    agent_model_simple: Annotated[Optional[str], typer.Option(help="Model for difficulty-1 tasks.")] = None,
    agent_model_complex: Annotated[Optional[str], typer.Option(help="Model for difficulty-3 tasks.")] = None,
    replay_from: Annotated[Optional[Path], typer.Option(help="Replay agent: trajectories to replay instead of our solutions.")] = None,
    parallel_kernels: Annotated[int, typer.Option(help="Kernels optimized at once (one grading per GPU at a time).")] = 1,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
    runs: Annotated[int, typer.Option(help="Benchmark runs.")] = 5,
    final_pairs: Annotated[Optional[int], typer.Option(help="Final-benchmark pairs (default: --runs, at least 6, the fewest for a distribution-free 95% interval).")] = None,
    cache_hours: Annotated[float, typer.Option(help="Reuse a benchmark of the same workload and environment this recent.")] = 0.0,
    min_speedup: Annotated[float, typer.Option(help="Credited speedup a winner needs to be integrated.")] = 1.05,
    leaderboard: Annotated[bool, typer.Option("--leaderboard/--no-leaderboard", help="Add the run's kernels to the leaderboard.")] = True,
    gpu: Annotated[Optional[str], typer.Option(help="Target architecture for the prompts (default: this machine's).")] = None,
    results_dir: ResultsOption = Path("results"),
    resume: Annotated[Optional[str], typer.Option(help="Go on with a run: its folder, or 'latest'.")] = None,
    stage: Annotated[Optional[str], typer.Option(help="Run only these stages (comma-separated), again if done.")] = None,
    as_json: JsonOption = False,
) -> None:
    """The whole pipeline: benchmark, identify, optimize, grade, integrate, benchmark-final, score, report.

    State is kept in results/runs/<run-id>/state.json: --resume goes on where a run stopped."""
    from apex_core.errors import ApexUserError
    from apex_core.pipeline.runner import run_pipeline
    from apex_core.pipeline.state import latest_run

    config = None
    resume_dir = None
    if resume is not None:
        resume_dir = latest_run(results_dir, workload).folder if resume == "latest" else Path(resume)
    else:
        if workload is None:
            raise ApexUserError("give --workload ID (e.g. cpu-mini) to start a run, or --resume RUN_DIR|latest")
        config = _run_config(workload=workload, kernels=_split(kernels), layers=layers, top_k=top_k,
                             kernel_types=_split(kernel_types), iterations=iterations, max_turns=max_turns,
                             score_threshold=score_threshold, agent=agent, agent_model=agent_model,
                             agent_model_simple=agent_model_simple, agent_model_complex=agent_model_complex,
                             replay_from=str(replay_from) if replay_from else None, parallel_kernels=parallel_kernels,
                             executor=executor, ray_address=ray_address, runs=runs, final_pairs=final_pairs, cache_hours=cache_hours, min_speedup=min_speedup, leaderboard=leaderboard, gpu=gpu)
    from apex_core.cli.live_run import live_run

    with live_run("run") as (progress, on_save):
        state = run_pipeline(config, results_dir, resume=resume_dir, only=_split(stage) or None, progress=progress,
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
    from apex_core.hardware.target import resolve_target
    from apex_core.pipeline.knowledge import KnowledgeBase

    base = KnowledgeBase()
    if task is None:
        records = base.overview()
        if as_json:
            print_json({"path": str(base.path), "tasks": [r.model_dump() for r in records]})
            return
        if not records:
            console.print(f"no gradings yet in {base.path}: 'apex run' records every graded iteration", highlight=False)
        for r in records:
            best = f"{r.best_speedup:.2f}x ({','.join(r.best_strategies) or 'no named strategy'})" if r.best_speedup else "none correct"
            console.print(f"{r.task_id} ({r.language}) on {r.target}: {r.experiments} gradings, {r.correct} correct, best {best}",
                          highlight=False)
        return
    from apex_core.tasks import get_task

    chosen = get_task(task)  # an unknown id is a one-line error naming the known ones
    target = resolve_target(gpu).arch
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


def optimize_kernel_command(
    task: Annotated[str, typer.Option("--task", help="The task to optimize (apex tasks list; apex tasks new makes one for any kernel).")],
    iterations: Annotated[int, typer.Option(help="Agent iterations.")] = 3,
    max_turns: Annotated[int, typer.Option(help="Agent turns per iteration.")] = 25,
    score_threshold: Annotated[float, typer.Option(help="A score that ends the iterations early.")] = 300.0,
    agent: Annotated[str, typer.Option(help="Agent backend: replay, claude, codex or cursor.")] = "replay",
    agent_model: Annotated[Optional[str], typer.Option(help="The agent's model.")] = None,
    replay_from: Annotated[Optional[Path], typer.Option(help="Replay agent: trajectories to replay.")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="Target architecture for the prompts (default: this machine's).")] = None,
    leaderboard: Annotated[bool, typer.Option("--leaderboard/--no-leaderboard", help="Add the result to the leaderboard.")] = True,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
    results_dir: ResultsOption = Path("results"),
    as_json: JsonOption = False,
) -> None:
    """The agent loop on one task, without a workload: iterations, a fresh grading of the best solution, score, report."""
    from apex_core.cli.live_run import live_run
    from apex_core.pipeline.runner import run_pipeline

    config = _run_config(workload=task, tasks=(task,), iterations=iterations, max_turns=max_turns, score_threshold=score_threshold,
                         agent=agent, agent_model=agent_model, replay_from=str(replay_from) if replay_from else None,
                         gpu=gpu, leaderboard=leaderboard, executor=executor, ray_address=ray_address)
    with live_run("optimize-kernel") as (progress, on_save):
        state = run_pipeline(config, results_dir, progress=progress, on_save=on_save)
    _show(state, as_json)
