"""What a pipeline run has done: ``<results>/runs/<run-id>/state.json``, rewritten atomically after
every change, so a run killed at any point resumes from its last finished stage (and, inside the
optimize stage, from its last finished iteration).

A state file is read as data about its own folder, never as a say in where a run writes: the
folder a run works in is where its state.json actually is (``read_state``), whatever the file's
``results_dir`` claims, and every file the state names (solutions, gradings, reports) must lie
in that folder, or the state is refused. So an edited state.json cannot send a resumed run's
writes, or its reads, anywhere else (issue 28), and a run folder that was moved still resumes.
Names that become file names (run, task and trajectory ids) are plain names, never paths.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from pathlib import Path
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from apex_core.agents.base import AgentRun
from apex_core.errors import ApexUserError
from apex_core.storage import atomic_write
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.figures import BaselineFigures, FinalRecord, ScoreSummary
from apex_core.pipeline.stages import STAGES

STATE_FILE = "state.json"
RUNS_DIR = "runs"

StageStatus = Literal["pending", "running", "done", "skipped", "failed"]
log = logging.getLogger(__name__)


def _plain_name(value: str | None) -> str | None:
    """An id that becomes part of a file name: no folder separators, not '.' or '..', not empty."""
    if value is not None and (not value or value in (".", "..") or any(c in value for c in "/\\\0")):
        raise ValueError(f"{value!r} is not a plain name (it becomes a file name: no '/', '\\', '.' or '..')")
    return value


class StageRecord(BaseModel):
    status: StageStatus = "pending"
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_s: float | None = None
    summary: str = ""
    error: str = ""


class GradeSummary(BaseModel):
    """The part of a grading the pipeline keeps beside the full result file."""

    outcome: str
    correct: bool
    speedup: float | None
    speedup_ci95: tuple[float, float] | None
    score: float
    normalized_score: float
    rl_reward: float | None
    flags: list[str] = Field(default_factory=list)
    reason: str = ""
    result_file: str


class IterationRecord(BaseModel):
    iteration: int = Field(ge=1)
    model: str | None
    agent: AgentRun
    solution_copy: str | None = Field(description="the solution of this iteration, kept (solution_iter<i>)")
    grade: GradeSummary
    feedback: str = Field(description="what the agent was told before this iteration (reflection and knowledge)")
    infra_retries: int = Field(default=0, description="gradings repeated because of an infrastructure error")


class KernelRecord(BaseModel):
    task_id: str
    kernel: str
    language: str
    difficulty: int
    rank: int = Field(description="its rank among the workload's kernels by device time")
    kernel_name: str = Field(description="the profiled kernel it stands for")
    device_time_share: float
    iterations: list[IterationRecord] = Field(default_factory=list)
    best_iteration: int | None = None
    best_solution: str | None = None
    stop_reason: str = ""
    final: GradeSummary | None = Field(default=None, description="the grade stage's fresh grading of the best solution")
    integrated: bool = False
    integration_note: str = ""
    trajectory_id: str | None = None

    _plain_ids = field_validator("task_id", "trajectory_id")(_plain_name)


class RunState(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    run_id: str
    created_at: str
    results_dir: str
    config: RunConfig
    stages: dict[str, StageRecord] = Field(default_factory=lambda: {name: StageRecord() for name in STAGES})
    baseline: BaselineFigures | None = Field(default=None, description="the benchmark stage's figures and file")
    identify_file: str | None = None
    kernels: list[KernelRecord] = Field(default_factory=list)
    accuracy: dict[str, object] = Field(default_factory=dict, description="the accuracy gate's figures and file (integrate stage)")
    final: FinalRecord | None = Field(default=None, description="the benchmark-final stage's figures and file")
    summary: ScoreSummary | None = Field(default=None, description="the score stage's results")
    reports: list[str] = Field(default_factory=list)
    _on_save: Callable[[RunState], None] | None = PrivateAttr(default=None)
    """Told after every save (the CLI's live table); never part of the state file."""
    _whole_run: bool = PrivateAttr(default=True)
    """A whole run restores its patches itself, so what integrate applies is the run process's own
    (rolled back by the next apex command if the process dies unwinding nothing); a lone integrate
    stage's patches stay for the stages run after it. Set by the runner; never in the state file."""

    _plain_run_id = field_validator("run_id")(_plain_name)

    @field_validator("baseline", "final", "summary", mode="before")
    @classmethod
    def _not_yet(cls, value: object) -> object:
        return None if value == {} else value  # state files before 2026-12-05 wrote {} for a stage not yet run

    @property
    def folder(self) -> Path:
        return Path(self.results_dir)

    def observe(self, on_save: Callable[[RunState], None] | None) -> None:
        self._on_save = on_save

    @property
    def whole_run(self) -> bool:
        return self._whole_run

    def run_as(self, *, whole: bool) -> None:
        self._whole_run = whole

    def save(self) -> None:
        atomic_write(self.folder / STATE_FILE, (self.model_dump_json(indent=1) + "\n").encode())
        if self._on_save is not None:
            self._on_save(self)

    def kernel(self, task_id: str) -> KernelRecord:
        return next(k for k in self.kernels if k.task_id == task_id)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run(config: RunConfig, results_root: Path) -> RunState:
    created = dt.datetime.now(dt.timezone.utc)
    run_id = f"{created.strftime('%Y%m%d-%H%M%S')}-{config.workload}-{secrets.token_hex(3)}"
    folder = (results_root / RUNS_DIR / run_id).resolve()
    folder.mkdir(parents=True)
    state = RunState(run_id=run_id, created_at=created.isoformat(timespec="seconds"), results_dir=str(folder), config=config)
    state.save()
    return state


def load_run(folder: Path) -> RunState:
    path = folder / STATE_FILE
    if not path.is_file():
        raise ApexUserError(f"{folder}: no {STATE_FILE} there; give a run folder that 'apex run' wrote (results/runs/<run-id>)")
    return read_state(path)


def read_state(path: Path) -> RunState:
    """The run state in ``path``, placed in the folder that holds it (``results_dir`` and every file
    the state names rebased there); a state that names a file outside that folder, or that is no
    run state, is refused in one line."""
    folder = path.parent.resolve()
    try:
        state = RunState.model_validate_json(path.read_bytes())
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ApexUserError(f"{path}: not a run state Apex can read ({where}: {first['msg']}); "
                            "give a run folder that 'apex run' wrote (results/runs/<run-id>)") from None
    return _placed(state, folder, path)


def _placed(state: RunState, folder: Path, path: Path) -> RunState:
    """``state`` with ``folder`` as its results_dir and each file it names in ``folder``: one named
    under the folder the state recorded moves with the run; ApexUserError for a file that lies (or,
    through a link, leads) outside both."""
    recorded = os.path.normpath(state.results_dir)

    def placed(value: str | None, field: str) -> str | None:
        if not isinstance(value, str) or not value:
            return value
        named = os.path.normpath(value)
        if not os.path.isabs(named):
            relative = named
        elif Path(named).is_relative_to(folder):  # already where the state is
            relative = os.path.relpath(named, folder)
        else:  # where the run was when it recorded the file
            relative = os.path.relpath(named, recorded) if os.path.isabs(recorded) else os.pardir
        moved = Path(os.path.normpath(folder / relative))
        if relative == os.pardir or relative.startswith(os.pardir + os.sep) or not moved.resolve().is_relative_to(folder):
            raise ApexUserError(
                f"{path}: {field} names {value!r}, outside the run's folder {folder}; a run's state names only files "
                "in its own folder, so this state.json was edited or is not Apex's: give a run folder that 'apex run' wrote")
        return str(moved)

    state.results_dir = str(folder)
    state.identify_file = placed(state.identify_file, "identify_file")
    for figures, name in ((state.baseline, "baseline"), (state.final, "final")):
        if figures is not None:
            figures.file = placed(figures.file, f"{name}.file")
    state.reports = [placed(report, f"reports[{i}]") or report for i, report in enumerate(state.reports)]
    for k, kernel in enumerate(state.kernels):
        where = f"kernels[{k}]"
        kernel.best_solution = placed(kernel.best_solution, f"{where}.best_solution")
        if kernel.final is not None:
            kernel.final.result_file = placed(kernel.final.result_file, f"{where}.final.result_file") or ""
        for i, iteration in enumerate(kernel.iterations):
            step = f"{where}.iterations[{i}]"
            iteration.solution_copy = placed(iteration.solution_copy, f"{step}.solution_copy")
            iteration.grade.result_file = placed(iteration.grade.result_file, f"{step}.grade.result_file") or ""
            iteration.agent.solution_path = placed(iteration.agent.solution_path, f"{step}.agent.solution_path") or ""
            iteration.agent.transcript_path = placed(iteration.agent.transcript_path, f"{step}.agent.transcript_path")
    return state


def run_states(results_root: Path, unreadable: list[str] | None = None) -> list[RunState]:
    """Every run under ``results_root/runs``, oldest folder name first. A run folder or state file
    that leads out of ``results_root`` through a link, or whose state cannot be read (empty,
    corrupt, not Apex's), is passed over, logged and added to ``unreadable`` in one line: one bad
    folder must not hide the others (``--resume latest``, export-rl, the leaderboard)."""
    root = Path(results_root).resolve()
    states = []
    for path in sorted((root / RUNS_DIR).glob(f"*/{STATE_FILE}")):
        if not path.resolve().is_relative_to(root):
            reason = f"passed over {path}: it leads out of the results folder {root} (to {path.resolve()})"
        else:
            try:
                states.append(read_state(path))
                continue
            except (ApexUserError, OSError) as error:
                reason = f"passed over {path.parent}: {error}"
        log.warning("%s", reason)
        if unreadable is not None:
            unreadable.append(reason)
    return states


def latest_run(results_root: Path, workload: str | None = None) -> RunState:
    """The newest run under ``results_root`` (of ``workload``, when given)."""
    runs = [s for s in run_states(results_root) if workload is None or s.config.workload == workload]
    if not runs:
        which = f" of {workload}" if workload else ""
        raise ApexUserError(f"no pipeline run{which} under {results_root / RUNS_DIR}: start one with 'apex run --workload ID'")
    return max(runs, key=lambda s: (s.created_at, s.run_id))
