"""``apex runs list|show|rm``: the pipeline runs under a results folder, as the MCP server's
``list_runs`` sees them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from apex_core.cli.output import JsonOption, console, print_json, progress_console

ResultsOption = Annotated[Path, typer.Option("--results-dir", help="Results folder whose runs/ holds the runs.")]
WhichArgument = Annotated[str, typer.Argument(help="A run id (or its first characters), a run folder, or 'latest'.")]

runs_app = typer.Typer(
    help="The pipeline runs under a results folder: list them, show one, remove one.\n\n"
         "Examples: apex runs list;  apex runs show latest;  apex runs rm 20261204-1012",
    no_args_is_help=True, rich_markup_mode=None)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def list_command(results_dir: ResultsOption = Path("results"), as_json: JsonOption = False) -> None:
    """Every run, newest first: status (running, stopped, failed, done), stages done, model reward."""
    from apex_core.pipeline.runs import run_summaries

    unreadable: list[str] = []
    summaries = run_summaries(results_dir, unreadable)
    for reason in unreadable:
        progress_console.print(f"note: {reason}", highlight=False, soft_wrap=True)
    if as_json:
        print_json({"runs": [s.model_dump(mode="json") for s in summaries], "unreadable": unreadable})
        return
    if not summaries:
        console.print(f"no runs under {results_dir / 'runs'}; start one with 'apex run --workload cpu-mini'", highlight=False)
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("run", "workload", "agent", "status", "stages done", "reward"):
        table.add_column(column)
    for s in summaries:
        where = f" ({s.stage_now})" if s.stage_now and s.status != "done" else ""
        reward = f"{s.model_reward:.3f}" if s.model_reward is not None else "-"
        table.add_row(s.run_id, s.workload, s.agent, s.status + where, str(len(s.stages_done)), reward)
    console.print(table)


@runs_app.command("show")
def show_command(run: WhichArgument = "latest", results_dir: ResultsOption = Path("results"), as_json: JsonOption = False) -> None:
    """One run's stages, each with its status, time and summary or error; its folder and reports."""
    from apex_core.cli.pipeline import show_state
    from apex_core.pipeline.run_lock import run_holding_the_lock
    from apex_core.pipeline.runs import find_run, summarize

    state = find_run(results_dir, run)
    if as_json:
        print_json({**state.model_dump(mode="json"), "status": summarize(state, run_holding_the_lock()).status})
        return
    show_state(state)


@runs_app.command("rm")
def remove_command(runs: Annotated[list[str], typer.Argument(help="Run ids (or their first characters) or run folders.")],
                   results_dir: ResultsOption = Path("results")) -> None:
    """Remove runs, folder and all (a running run is refused). Every run named is checked before any is removed."""
    from apex_core.pipeline.runs import remove_runs

    for state in remove_runs(results_dir, runs):
        console.print(f"removed {state.run_id} ({state.folder})", highlight=False)
