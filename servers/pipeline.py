"""The pipeline MCP server: the whole optimization of a model in one tool call, as ``apex run``.

A thin layer over ``apex_core.pipeline``: ``run_pipeline`` takes the same typed settings as the
command (workload, kernel stack, top-k, languages, iterations, turns, agent and models,
leaderboard) and returns each stage's status and the run's results; ``pipeline_status`` reads a
run's state; ``show_leaderboard`` and ``export_rl_dataset`` read across runs.

Every folder a caller names is confined to ``results/`` (``servers._paths``): a run by its id or its
folder under results/runs, the export's folder inside results/; and a resumed run works where its
state.json is, never where the file says (``apex_core.pipeline.state.read_state``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastmcp import Context
from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.pipeline.child import run_in_child
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.export_rl import ExportSummary, export_rl
from apex_core.pipeline.leaderboard import LEADERBOARD_FILE, Leaderboard, Standing
from apex_core.pipeline.runs import RunSummary, run_summaries
from apex_core.pipeline.state import RunState, latest_run, load_run
from apex_core.signatures import parameters_of, with_parameters
from servers._common import READ_ONLY, create_server, log
from servers._paths import RESULTS_ROOT, inside_results, run_folder
from servers._settings import settings_of, tool_parameters

mcp = create_server(
    "apex-pipeline",
    "Runs the whole kernel-optimization pipeline of a model: run_pipeline (benchmark, identify the bottleneck kernels, "
    "let an agent optimize each, grade, integrate the winners, benchmark again, score, report), list_runs and "
    "pipeline_status for runs' progress and results, show_leaderboard across runs, export_rl_dataset for training data.",
)


class StageView(BaseModel):
    name: str
    status: str
    elapsed_s: float | None
    summary: str


class RunView(BaseModel):
    run_id: str
    results_dir: str
    config: RunConfig
    stages: list[StageView]
    kernels: list[dict[str, Any]] = Field(description="each optimized kernel: task, iterations, fresh grading, integrated")
    baseline_tokens_per_s: float | None
    final: dict[str, Any] = Field(description="benchmark-final: median tokens/s ratio, interval, significance")
    model_reward: float | None
    reports: list[str] = Field(description="report.md and report.html")


def _view(state: RunState) -> RunView:
    kernels = [{"task_id": k.task_id, "device_time_share": k.device_time_share, "iterations": len(k.iterations),
                "best_iteration": k.best_iteration, "stop_reason": k.stop_reason,
                "final": k.final.model_dump() if k.final else None, "integrated": k.integrated,
                "integration_note": k.integration_note} for k in state.kernels]
    stages = [StageView(name=n, status=r.status, elapsed_s=r.elapsed_s, summary=r.error or r.summary) for n, r in state.stages.items()]
    return RunView(run_id=state.run_id, results_dir=str(state.folder), config=state.config, stages=stages, kernels=kernels,
                   baseline_tokens_per_s=state.baseline.tokens_per_s if state.baseline else None,
                   final=state.final.model_dump(mode="json", exclude={"file"}) if state.final else {},
                   model_reward=state.summary.model_reward if state.summary else None, reports=state.reports)


PIPELINE_SETTINGS = ("workload", "kernels", "top_k", "languages", "iterations", "max_turns", "agent", "agent_model",
                     "score_threshold", "runs", "final_pairs", "leaderboard", "executor", "ray_address")
"""The settings ``run_pipeline`` takes, each with ``RunConfig``'s type, bounds, default and description."""
TOOL_NAMES = {"kernels": "kernel_stacks"}


async def _resume_options(
    ctx: Context,
    resume_run: Annotated[str | None, Field(min_length=1, max_length=4096, description=(
        "Go on with this run instead of starting one: its run id (list_runs) or its folder, results/runs/<run-id>."))] = None,
) -> None:
    """``run_pipeline``'s own parameters, beside the run's settings."""


@mcp.tool
@with_parameters(parameters_of(_resume_options)[:1] + tool_parameters(RunConfig, PIPELINE_SETTINGS, rename=TOOL_NAMES)
                 + parameters_of(_resume_options)[1:], returns=RunView)
async def run_pipeline(ctx: Context, resume_run: str | None = None, **settings: Any) -> RunView:
    """Optimize a model's bottleneck kernels end to end: benchmark, identify, optimize (the agent loop), grade,
    integrate the winners, benchmark again, score and report. Use it when asked to run the full optimization
    pipeline for a model. Takes minutes on cpu-mini, longer on GPU models; state is kept, so resume_run goes on
    with an interrupted run."""
    config = None if resume_run else RunConfig(**settings_of(RunConfig, settings, rename=TOOL_NAMES))
    resume = await anyio.to_thread.run_sync(_resumable, resume_run) if resume_run else None
    # In a child process of its own: it restores the environment even when the host or this server goes away.
    state = await run_in_child(
        config, RESULTS_ROOT, resume=resume,
        progress=lambda fraction, message: ctx.report_progress(round(100 * fraction, 2), 100.0, message),
        started=lambda pid, folder: log.info("run_pipeline: run %s in process %d", folder, pid))
    return _view(state)


def _resumable(value: str) -> Path:
    """The run folder ``resume_run`` names, once its state reads and everything it would read lies
    inside results/ (a replay file included); the child then loads it from there again."""
    folder = run_folder(value, "resume_run")
    state = load_run(folder)
    if state.config.replay_from:
        inside_results(state.config.replay_from, f"the replay_from of run {state.run_id}", "results/runs/<run-id>/trajectories/...")
    return folder


@mcp.tool(annotations=READ_ONLY)
async def pipeline_status(
    run: Annotated[str | None, Field(min_length=1, max_length=4096, description=(
        "A run: its run id (list_runs) or its folder, results/runs/<run-id>; default: the newest run."))] = None,
    workload: Annotated[str | None, Field(max_length=64, description="With no run: the newest run of this workload.")] = None,
) -> RunView:
    """A pipeline run's stages, kernels, figures and reports. Use it to follow or summarize a run."""
    state = await anyio.to_thread.run_sync(lambda: load_run(run_folder(run, "run")) if run else latest_run(RESULTS_ROOT, workload))
    return _view(state)


class RunList(BaseModel):
    runs: list[RunSummary] = Field(description="newest first: id, folder, workload, agent, created, status, stages done, model reward")
    unreadable: list[str] = Field(default_factory=list, description="run folders passed over, each with its reason")


@mcp.tool(annotations=READ_ONLY)
async def list_runs() -> RunList:
    """The pipeline runs under results/, newest first (an empty list when there are none). Use it to find a run
    before pipeline_status or resume_run."""
    def read() -> RunList:
        unreadable: list[str] = []
        return RunList(runs=run_summaries(RESULTS_ROOT, unreadable), unreadable=unreadable)

    return await anyio.to_thread.run_sync(read)


class Experiments(BaseModel):
    knowledge_base: str
    tasks: list[dict[str, Any]] = Field(description="per task, language and target: gradings, correct ones, best speedup")
    past_gradings: list[dict[str, Any]] = Field(description=(
        "for the task asked about: the records its prompts quote (best correct first, then the latest failures); "
        "codes and figures only, no text a solution or an agent wrote"))


@mcp.tool(annotations=READ_ONLY)
async def past_experiments(
    task_id: Annotated[str | None, Field(max_length=128, description="A task id, e.g. llama-3-1-8b-instruct__rms_norm; none: "
                                                                     "every task's totals.")] = None,
    target: Annotated[str | None, Field(max_length=32, description="GPU target, e.g. gfx950; default: this machine's.")] = None,
) -> Experiments:
    """What earlier gradings on this machine measured, from the grader's verdicts: per task the gradings and the
    best speedup with its strategies, and for one task (in its language, on the target) the best correct gradings
    and the latest failures as structured records. Use it before optimizing a task, to start from what is known."""
    def read() -> Experiments:
        from apex_core.pipeline.knowledge import KnowledgeBase, records_of
        from apex_core.tasks import get_task

        base = KnowledgeBase()
        past = []
        if task_id:
            task = get_task(task_id)
            past = [p.model_dump(mode="json") for p in base.insights(task.id, task.language, records_of(task, target))]
        return Experiments(knowledge_base=str(base.path), tasks=[r.model_dump() for r in base.overview()], past_gradings=past)

    return await anyio.to_thread.run_sync(read)


class LeaderboardView(BaseModel):
    standings: list[Standing]
    entries: list[dict[str, Any]]


@mcp.tool(annotations=READ_ONLY)
async def show_leaderboard(
    task: Annotated[str | None, Field(max_length=128, description="Only this task's rows.")] = None,
    agent: Annotated[str | None, Field(max_length=32, description="Only this agent's rows.")] = None,
) -> LeaderboardView:
    """Every optimized kernel of every run, best first, and the standings per agent, model and version. Use it
    to compare agents and models, or after run_pipeline with the leaderboard on."""
    if not (RESULTS_ROOT / LEADERBOARD_FILE).is_file():
        raise ApexUserError(f"no leaderboard in {RESULTS_ROOT} yet: run_pipeline adds to it")
    board = Leaderboard(RESULTS_ROOT)
    return LeaderboardView(standings=board.standings(), entries=board.entries(task, agent))


@mcp.tool
async def export_rl_dataset(
    output_dir: Annotated[str, Field(min_length=1, max_length=4096, description=(
        "Folder inside results/ to write the datasets into, e.g. results/exports/rl (paths leading out of results/ are refused)."))],
    sft: Annotated[bool, Field(description="Also write prompt -> correct solution pairs.")] = False,
    min_score: Annotated[float, Field(ge=0, le=1, description="SFT pairs need this normalized kernel score.")] = 0.0,
    format: Annotated[Literal["jsonl", "parquet"], Field(description="File format; both load with Hugging Face datasets.")] = "jsonl",
) -> ExportSummary:
    """Tasks, every trajectory step (code, verdict, reward) and SFT pairs of all runs, with provenance. Use it
    after runs to get training data for RL or SFT."""
    def export() -> ExportSummary:
        output = inside_results(output_dir, "output_dir", "results/exports/rl")
        if output.exists() and not output.is_dir():
            raise ApexUserError(f"output_dir {output_dir!r} is a file; give a folder inside results/, e.g. results/exports/rl")
        return export_rl(RESULTS_ROOT, output, sft=sft, min_score=min_score, fmt=format)

    return await anyio.to_thread.run_sync(export)


def main() -> Any:
    return mcp.run()


if __name__ == "__main__":
    main()
