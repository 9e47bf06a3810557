"""The runs under a results folder, as a user manages them: listed with where each stands, one
found by id, prefix or folder, one removed.

A run's status is read from its stages and from the environment's run lock: a stage marked
``running`` is only running while the run that marked it still holds the lock; otherwise the run
was stopped (killed, or its machine went down) and ``apex run --resume`` goes on with it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.pipeline.run_lock import run_holding_the_lock
from apex_core.pipeline.state import RUNS_DIR, STATE_FILE, RunState, latest_run, read_state, run_states

RunStatus = Literal["running", "stopped", "failed", "done", "started"]


class RunSummary(BaseModel):
    """One run in a line: what ``apex runs list`` prints and the MCP ``list_runs`` returns."""

    run_id: str
    results_dir: str
    workload: str
    agent: str
    created_at: str
    status: RunStatus = Field(description="running (its process holds the run lock), stopped (killed mid-stage: "
                                          "resume it), failed (a stage failed: its error), done, or started (stages left)")
    stages_done: list[str]
    stage_now: str | None = Field(default=None, description="the stage running, stopped in or failed, if any")
    error: str = ""
    model_reward: float | None = None


def summarize(state: RunState, running_run: str | None) -> RunSummary:
    """``state`` in a line; ``running_run``: the id of the run holding the environment's run lock."""
    stages = state.stages
    done = [name for name, record in stages.items() if record.status in ("done", "skipped")]
    marked = next((name for name, record in stages.items() if record.status == "running"), None)
    failed = next((name for name, record in stages.items() if record.status == "failed"), None)
    status: RunStatus
    if marked is not None:
        status = "running" if running_run == state.run_id else "stopped"
    elif failed is not None:
        status = "stopped" if stages[failed].error == "interrupted" else "failed"
    else:
        status = "done" if len(done) == len(stages) else "started"
    now = marked or failed
    reward = state.summary.model_reward if state.summary else None
    return RunSummary(run_id=state.run_id, results_dir=str(state.folder), workload=state.config.workload,
                      agent=state.config.agent, created_at=state.created_at, status=status, stages_done=done,
                      stage_now=now, error=stages[now].error if now else "",
                      model_reward=reward)


def run_summaries(results_root: Path, unreadable: list[str] | None = None) -> list[RunSummary]:
    """Every run under ``results_root``, newest first; a folder whose state cannot be read is passed
    over, with its one-line reason added to ``unreadable``."""
    running = run_holding_the_lock()
    states = run_states(results_root, unreadable)
    states.sort(key=lambda s: (s.created_at, s.run_id), reverse=True)
    return [summarize(state, running) for state in states]


def find_run(results_root: Path, which: str) -> RunState:
    """The run ``which`` names: 'latest', a run id, the start of exactly one run id, or a run folder."""
    if which == "latest":
        return latest_run(results_root)
    folder = Path(which)
    if (folder / STATE_FILE).is_file():
        return read_state(folder / STATE_FILE)
    runs = results_root / RUNS_DIR
    if (runs / which / STATE_FILE).is_file() and Path(which).name == which:
        return read_state(runs / which / STATE_FILE)
    matches = sorted(p.parent.name for p in runs.glob(f"*/{STATE_FILE}") if p.parent.name.startswith(which)) \
        if which and Path(which).name == which else []
    if len(matches) == 1:
        return read_state(runs / matches[0] / STATE_FILE)
    if len(matches) > 1:
        raise ApexUserError(f"{which!r} starts {len(matches)} run ids under {runs} ({', '.join(matches[:3])}"
                            f"{', ...' if len(matches) > 3 else ''}); give more of the id")
    raise ApexUserError(f"no run {which!r} under {runs}: give a run id from 'apex runs list', its folder, or 'latest'")


def remove_runs(results_root: Path, which: list[str]) -> list[RunState]:
    """Delete the runs ``which`` names, folders and all. Every one is found and checked first: a
    name that finds no run, or a run that is running, is refused before anything is removed."""
    running = run_holding_the_lock()
    found = [find_run(results_root, name) for name in which]
    for state in found:
        if state.run_id == running:
            raise ApexUserError(f"run {state.run_id} is running; stop it first (Ctrl-C in its terminal), then remove it")
    for state in found:
        shutil.rmtree(state.folder)
    return found
