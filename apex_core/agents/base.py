"""The agent interface: what a backend is given, what it reports, and the checks before it runs
(the registry of backends by name is ``registry.py``, which imports them all)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from apex_core.tasks.schema import Task


class AgentToolCall(BaseModel):
    """One tool the agent called, as its host reported it."""

    name: str
    arguments: str = Field(default="", description="the arguments as JSON, cut to 500 characters")
    ok: bool | None = Field(default=None, description="whether the host reported success (None: not reported)")
    result: str = Field(default="", description="the start of what the tool returned, cut to 300 characters")


class AgentRun(BaseModel):
    """What happened when an agent worked on a task (its account, not a verdict)."""

    backend: str
    solution_path: str
    wrote_solution: bool
    elapsed_s: float
    exit_code: int | None = None
    transcript_path: str | None = None
    summary: str = ""
    turns: int | None = None
    """Turns the agent took, where its backend reports them (None: not reported, e.g. the replay agent)."""
    tool_calls: list[AgentToolCall] = Field(default_factory=list)
    attempts: int = 1
    """Sessions started: more than one when the host failed for reasons of its own (network, start-up)."""
    infra_error: str = ""
    """Non-empty when every attempt failed for the host's own reasons: not the agent's failure."""


class Agent(Protocol):
    name: str

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun: ...


def preflight(agent: Agent, task: Task, solution_path: Path) -> None:
    """Let ``agent`` refuse before anything is written (a backend may define ``preflight``)."""
    check = getattr(agent, "preflight", None)
    if check is not None:
        check(task, solution_path)


def available(agent: Agent) -> None:
    """Let ``agent`` refuse before any task is known (a backend with a CLI checks it is there)."""
    check = getattr(agent, "available", None)
    if check is not None:
        check()
