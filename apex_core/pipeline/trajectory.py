"""Trajectories: every iteration of every kernel of a run, as an RL framework needs it: the prompt
and feedback the agent got, what the agent did (its own account and transcript), the solution it
left (the code itself), the grader's verdict and the reward. One JSON file per kernel,
``<run>/trajectories/<trajectory-id>.json``; the replay agent can replay them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, Field

from apex_core.agents.base import AgentRun
from apex_core.storage import atomic_write
from apex_core.pipeline.state import GradeSummary

TRAJECTORIES_DIR = "trajectories"


class TrajectoryStep(BaseModel):
    iteration: int
    model: str | None
    system_prompt_sha256: str
    prompt: str
    feedback: str
    agent: AgentRun
    solution_code: str | None = Field(description="the file the agent left, as graded; None when it left none")
    grade: GradeSummary
    reward: float | None = Field(description="the grader's RL reward (apex_core.score.rl_reward); None for infra errors")


class Trajectory(BaseModel):
    trajectory_id: str
    run_id: str
    task_id: str
    kernel: str
    target: str
    agent: str
    iterations: list[TrajectoryStep] = Field(default_factory=list)
    best_iteration: int | None = None
    stop_reason: str = ""

    def save(self, run_folder: Path) -> Path:
        path = run_folder / TRAJECTORIES_DIR / f"{self.trajectory_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, (self.model_dump_json(indent=1) + "\n").encode())
        return path


def trajectory_id(run_id: str, task_id: str) -> str:
    return f"{task_id}-{hashlib.sha256(f'{run_id}/{task_id}'.encode()).hexdigest()[:10]}"


def load_trajectory(run_folder: Path, trajectory: str) -> Trajectory | None:
    path = run_folder / TRAJECTORIES_DIR / f"{trajectory}.json"
    return Trajectory.model_validate_json(path.read_bytes()) if path.is_file() else None
