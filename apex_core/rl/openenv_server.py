"""Apex as an OpenEnv environment: ``apex env serve`` runs an HTTP and WebSocket server that any
OpenEnv client (``openenv.core.GenericEnvClient``, TRL's environment integrations) can reset and
step. The server and its protocol are the ``openenv-core`` package's own (``create_app``); this
module only adapts ``KernelEnvironment`` to its ``Environment`` interface.

Episodes live on a WebSocket session (OpenEnv's HTTP reset and step make a fresh environment per
request, so they cannot carry an episode). Every session has its own ``KernelEnvironment``; all of
them share one executor, which decides how many gradings run at once.

    reset: {"task_id": "cpu-mini__rms_norm"} or {"progress": 0.3} (a curriculum draw)
    step:  {"kind": "tool", "tool": "check", "arguments": {"code": "..."}} or {"kind": "submit", "code": "..."}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from apex_core.errors import ApexUserError
from apex_core.executors import Executor
from apex_core.grader import GradeOptions
from apex_core.pipeline.state import GradeSummary
from apex_core.rl.environment import KernelEnvironment
from apex_core.rl.models import EpisodeSettings, Submit, ToolCall, ToolName
from apex_core.suite.curriculum import Curriculum

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError as missing:  # pragma: no cover - the message is what the user sees
    raise ApexUserError("apex env serve needs OpenEnv: pip install -e '.[openenv]' (the openenv-core package)") from missing


class ApexAction(Action):
    """A tool call or a submission (``kind`` says which), as OpenEnv sends it."""

    kind: Literal["tool", "submit"]
    tool: ToolName | None = Field(default=None, description="with kind=tool: the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="with kind=tool: its arguments")
    code: str | None = Field(default=None, description="with kind=submit: the whole solution file")


class ApexObservation(Observation):
    """What the policy reads; ``reward`` and ``done`` are OpenEnv's own fields."""

    task_id: str = ""
    text: str = ""
    turn: int = 0
    turns_left: int = 0
    grade: GradeSummary | None = None
    error: str | None = None


class ApexOpenEnv(Environment):
    """One session's episodes on the shared executor."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, executor: Executor, settings: EpisodeSettings, curriculum: Curriculum | None,
                 grade_options: GradeOptions | None) -> None:
        super().__init__()
        self.core = KernelEnvironment(executor, settings, curriculum, grade_options, policy="openenv")

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              progress: float = 0.0, **_: Any) -> ApexObservation:
        try:
            return _observation(self.core.reset(task_id=task_id, progress=progress, episode_id=episode_id))
        except ApexUserError as error:
            return ApexObservation(text=f"error: {error}", error=str(error), done=True, reward=None)

    def step(self, action: ApexAction, timeout_s: float | None = None, **_: Any) -> ApexObservation:  # type: ignore[override]
        try:
            if action.kind == "submit":
                if not action.code:
                    return self._refused("a submission needs its code: {\"kind\": \"submit\", \"code\": \"...\"}")
                return _observation(self.core.step(Submit(code=action.code)))
            if action.tool is None:
                return self._refused("a tool call needs its tool: {\"kind\": \"tool\", \"tool\": ..., \"arguments\": {...}}")
            return _observation(self.core.step(ToolCall(tool=action.tool, arguments=action.arguments)))
        except ApexUserError as error:
            return self._refused(str(error))

    def _refused(self, why: str) -> ApexObservation:
        return ApexObservation(task_id=self.core.task.id if self.core.task else "", text=f"error: {why}", error=why,
                               done=self.core.done, reward=0.0, turn=self.core.turn)

    @property
    def state(self) -> State:
        return State(episode_id=self.core.episode_id or None, step_count=self.core.turn)


def _observation(observation: Any) -> ApexObservation:
    return ApexObservation(task_id=observation.task_id, text=observation.text, reward=observation.reward, done=observation.done,
                           turn=observation.turn, turns_left=observation.turns_left, grade=observation.grade,
                           error=observation.error)


def make_app(executor: Executor, settings: EpisodeSettings | None = None, curriculum: Curriculum | None = None,
             grade_options: GradeOptions | None = None, max_sessions: int = 16) -> Any:
    """The OpenEnv FastAPI app: ``max_sessions`` WebSocket episodes at once on ``executor``."""
    chosen = settings or EpisodeSettings()
    return create_app(lambda: ApexOpenEnv(executor, chosen, curriculum, grade_options), ApexAction, ApexObservation,
                      env_name="apex", max_concurrent_envs=max_sessions)
