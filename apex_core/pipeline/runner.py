"""Running the stages in order, resuming a run where it stopped, and leaving the environment as
it was found.

A stage that is done or skipped is not run again on resume; one that was running when the run
was killed, or failed, runs again (the optimize stage then goes on from its last finished
iteration). A user mistake stops the run with the stage marked failed and its one-line reason.
Whatever happens, a run (not a lone stage) leaves no patch behind: benchmark-final restores
them itself, and a run stopped between integrate and benchmark-final restores here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.run_lock import needs_the_lock, one_run_per_environment
from apex_core.pipeline.stages import STAGES, stage_function
from apex_core.pipeline.stages.common import Skip
from apex_core.pipeline.state import RunState, load_run, new_run, now
from apex_core.progress import Progress, reporter


def check_stages(names: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(names)
    unknown = [n for n in chosen if n not in STAGES]
    if unknown:
        raise ApexUserError(f"stage {unknown[0]!r}: the stages are {', '.join(STAGES)}")
    return chosen


def run_pipeline(config: RunConfig | None, results_root: Path, *, resume: Path | None = None,
                 only: Iterable[str] | None = None, progress: Progress | None = None,
                 on_save: Callable[[RunState], None] | None = None) -> RunState:
    """Start a run of ``config`` (or resume the run in ``resume``) and take it as far as it goes.
    ``only``: run just these stages (again, even if done), e.g. ("report",); ``on_save``: told
    after every change of the state (a live view)."""
    chosen = check_stages(only) if only is not None else None
    with contextlib.ExitStack() as held:
        return _run(config, results_root, resume, chosen, progress, on_save, held)


def _run(config: RunConfig | None, results_root: Path, resume: Path | None, chosen: tuple[str, ...] | None,
         progress: Progress | None, on_save: Callable[[RunState], None] | None, held: contextlib.ExitStack) -> RunState:
    if resume is not None:
        if needs_the_lock(chosen):
            held.enter_context(one_run_per_environment(resume.name))
        state = load_run(resume)
    elif config is not None:
        from apex_core.workloads import get_workload

        if config.tasks:
            from apex_core.tasks import get_task

            for task_id in config.tasks:  # an unknown task fails before a run folder exists
                get_task(task_id)
        else:
            get_workload(config.workload)  # an unknown workload fails before a run folder exists
        _check_before_a_run_folder(config)
        lock = held.enter_context(one_run_per_environment(f"(a new run of {config.workload})"))
        state = new_run(config, results_root)
        lock.annotate({"run_id": state.run_id})
    else:
        raise ApexUserError("give --workload to start a run, or --resume RUN_DIR to go on with one")
    if resume is not None and chosen is None:
        _integrate_again_if_restored(state)
    state.observe(on_save)
    state.run_as(whole=chosen is None)
    report = reporter(progress)
    previous_sigterm = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM's default ends the process without unwinding; as SystemExit the run restores its patches.
        previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    todo = [n for n in STAGES if (n in chosen if chosen is not None else state.stages[n].status not in ("done", "skipped"))]
    try:
        for position, name in enumerate(todo):
            record = state.stages[name]
            record.status, record.started_at, record.error, record.summary = "running", now(), "", ""
            state.save()
            started = time.monotonic()
            low, high = position / len(todo), (position + 1) / len(todo)
            stage_progress = (lambda f, m, n=name, lo=low, hi=high: report(lo + (hi - lo) * f, f"{n}: {m}"))
            report(low, f"{name}: starting")
            try:
                record.summary = stage_function(name)(state, stage_progress)
                record.status = "done"
            except Skip as skip:
                record.status, record.summary = "skipped", str(skip)
            except ApexUserError as error:
                record.status, record.error = "failed", str(error)
                raise
            finally:
                if record.status == "running":  # interrupted: it runs again on resume
                    record.status = "failed"
                    record.error = record.error or "interrupted"
                record.finished_at, record.elapsed_s = now(), round(time.monotonic() - started, 3)
                state.save()
            report(high, f"{name}: {record.status}: {record.summary}")
    except (SystemExit, KeyboardInterrupt):
        _mark_stopped_between_stages(state, todo)
        raise
    finally:
        if chosen is None and state.stages["integrate"].status in ("done", "failed"):  # a lone integrate stage keeps its patches
            from apex_core.patcher import restore

            restore()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
    return state


def _integrate_again_if_restored(state: RunState) -> None:
    """A run stopped after integrate restored its patches on the way out (it never leaves one
    behind), so benchmark-final, resumed, would find nothing to measure: integrate runs again
    first, from the same gradings."""
    from apex_core.patcher import status

    integrate, final = state.stages["integrate"], state.stages["benchmark-final"]
    if integrate.status != "done" or final.status in ("done", "skipped"):
        return
    journal = status()
    if journal is None or not journal.active():
        integrate.status = "pending"
        integrate.summary = "to run again: the patches were restored when the run stopped"


def _mark_stopped_between_stages(state: RunState, todo: list[str]) -> None:
    """A stop that lands outside a stage's own try (its progress line, the save before it starts)
    is recorded on the stage it was in or about to start, so the run reads as stopped and that stage
    runs again on resume, as a stop inside a stage is."""
    if any(state.stages[name].error == "interrupted" for name in todo):
        return  # the stage it landed in recorded it
    current = next((name for name in todo if state.stages[name].status in ("running", "pending")), None)
    if current is None:
        return
    record = state.stages[current]
    record.status, record.error, record.finished_at = "failed", "interrupted", now()
    state.save()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _check_before_a_run_folder(config: RunConfig) -> None:
    """What would fail a run minutes in (a target, the agent's CLI, its recorded trajectories) fails
    now, in one line, before a run folder exists."""
    from apex_core.agents.base import available
    from apex_core.agents.registry import make_agent
    from apex_core.hardware.target import resolve_target

    if config.gpu is not None:
        resolve_target(config.gpu)
    if config.executor == "ray":
        from apex_core.executors.ray_executor import check_reachable

        check_reachable(config.ray_address or os.environ.get("RAY_ADDRESS"))
    available(make_agent(config.agent, model=config.agent_model,
                         replay_from=Path(config.replay_from) if config.replay_from else None))
