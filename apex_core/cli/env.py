"""``apex env serve``: Apex as an OpenEnv environment for RL trainers (docs/rl.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from apex_core.cli.executor_options import ExecutorOption, RayAddressOption

app = typer.Typer(help="Apex as an RL environment: serve its episodes to trainers.", no_args_is_help=True,
                  rich_markup_mode=None)


def register(main_app: typer.Typer) -> None:
    """Add ``apex env`` to the main command."""
    main_app.add_typer(app, name="env")


@app.command("serve")
def env_serve(
    host: Annotated[str, typer.Option(help="Address to bind: keep 127.0.0.1 unless a firewall or tunnel guards the port "
                                           "(the server has no authentication).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    tasks: Annotated[Optional[str], typer.Option(help="Comma-separated task ids episodes may draw from (default: all).")] = None,
    max_turns: Annotated[int, typer.Option(min=1, max=200, help="Steps per episode.")] = 8,
    max_submissions: Annotated[int, typer.Option(min=1, max=20, help="Graded submissions per episode.")] = 1,
    max_sessions: Annotated[int, typer.Option(min=1, max=1024, help="WebSocket episodes at once.")] = 16,
    record_dir: Annotated[Optional[str], typer.Option(help="Write each episode's trajectory under this folder.")] = None,
    executor: ExecutorOption = "local",
    ray_address: RayAddressOption = None,
) -> None:
    """Serve OpenEnv episodes: reset with {"task_id": ...} (or {"progress": p} to draw from the
    curriculum), step with a tool call or a submission; rewards are the grader's RL reward.

    Example: apex env serve --port 8000 --tasks cpu-mini__rms_norm"""
    import uvicorn

    from apex_core.executors import make_executor
    from apex_core.rl.environment import tasks_for
    from apex_core.rl.models import EpisodeSettings
    from apex_core.rl.openenv_server import make_app
    from apex_core.suite.curriculum import Curriculum

    chosen = tasks_for([t.strip() for t in tasks.split(",") if t.strip()] if tasks else None)
    settings = EpisodeSettings(max_turns=max_turns, max_submissions=max_submissions, record_dir=record_dir)
    grading = make_executor(executor, ray_address)
    try:
        app_ = make_app(grading, settings, Curriculum(chosen), max_sessions=max_sessions)
        typer.echo(f"apex env: OpenEnv server on http://{host}:{port} ({len(chosen)} task(s), {executor} executor)", err=True)
        uvicorn.run(app_, host=host, port=port, log_level="warning")
    finally:
        grading.close()
