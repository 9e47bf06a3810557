"""What a pipeline run has done: ``<results>/runs/<run-id>/state.json``, rewritten atomically after
every change, so a run killed at any point resumes from its last finished stage (and, inside the
optimize stage, from its last finished iteration)."""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

from apex_core.agents.base import AgentRun
from apex_core.errors import ApexUserError
from apex_core.patcher.files import atomic_write
from apex_core.pipeline.config import RunConfig

STAGES = ("benchmark", "identify", "optimize", "grade", "integrate", "benchmark-final", "score", "report")
STATE_FILE = "state.json"
RUNS_DIR = "runs"

StageStatus = Literal["pending", "running", "done", "skipped", "failed"]


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


class RunState(BaseModel):
    run_id: str
    created_at: str
    results_dir: str
    config: RunConfig
    stages: dict[str, StageRecord] = Field(default_factory=lambda: {name: StageRecord() for name in STAGES})
    baseline: dict[str, object] = Field(default_factory=dict, description="the benchmark stage's figures and file")
    identify_file: str | None = None
    kernels: list[KernelRecord] = Field(default_factory=list)
    final: dict[str, object] = Field(default_factory=dict, description="the benchmark-final stage's figures and file")
    summary: dict[str, object] = Field(default_factory=dict, description="the score stage's results")
    reports: list[str] = Field(default_factory=list)
    _on_save: Callable[[RunState], None] | None = PrivateAttr(default=None)
    """Told after every save (the CLI's live table); never part of the state file."""

    @property
    def folder(self) -> Path:
        return Path(self.results_dir)

    def observe(self, on_save: Callable[[RunState], None] | None) -> None:
        self._on_save = on_save

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
    return RunState.model_validate_json(path.read_bytes())


def latest_run(results_root: Path, workload: str | None = None) -> RunState:
    """The newest run under ``results_root`` (of ``workload``, when given)."""
    runs = []
    for path in sorted((results_root / RUNS_DIR).glob(f"*/{STATE_FILE}")):
        state = RunState.model_validate_json(path.read_bytes())
        if workload is None or state.config.workload == workload:
            runs.append(state)
    if not runs:
        which = f" of {workload}" if workload else ""
        raise ApexUserError(f"no pipeline run{which} under {results_root / RUNS_DIR}: start one with 'apex run --workload ID'")
    return max(runs, key=lambda s: (s.created_at, s.run_id))
