"""One RL episode on one Apex task: ``reset`` poses the task, ``step`` takes a tool call or a
submission and answers with an observation, a reward and whether the episode is over.

This is the core every trainer integration wraps (OpenEnv's server, the verifiers environment, the
TRL reward function): they differ in protocol, not in what an episode is. Gradings go through an
executor (local, or Ray: an RL cluster's GPUs grade while the trainer's GPUs train), which a
process shares between its episodes. Rewards are ``apex_core.score.rl_reward`` as the grader
computed it; an episode's steps are kept as a trajectory in the pipeline's format.

Rewards per step (docs/rl.md):
- a tool call earns 0.0, a bad one too (its error is the observation);
- a submission earns its grading's RL reward, or None when the infrastructure failed (the sample
  says nothing of the policy: drop it);
- running out of turns without a submission ends the episode with ``NO_SOLUTION_REWARD``.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

from pydantic import TypeAdapter

from apex_core.agents.base import AgentRun, AgentToolCall
from apex_core.errors import ApexUserError
from apex_core.executors import Executor
from apex_core.grader import GradeOptions
from apex_core.hardware.target import resolve_target
from apex_core.pipeline.optimize import summarize
from apex_core.pipeline.trajectory import Trajectory, TrajectoryStep
from apex_core.prompts import system_prompt, task_prompt
from apex_core.rl.models import Action, EpisodeSettings, Observation, Submit, ToolCall
from apex_core.rl.tools import TOOL_DESCRIPTIONS, grade_code, run_tool
from apex_core.score import RL_REWARD_FOR_OUTCOME
from apex_core.suite.curriculum import Curriculum
from apex_core.tasks import all_tasks, get_task
from apex_core.tasks.schema import Task

NO_SOLUTION_REWARD = RL_REWARD_FOR_OUTCOME["compile_error"]
"""An episode whose turns ran out before any submission: scored as the worst honest failure, so
stalling never beats trying."""

ACTION = TypeAdapter(Action)


def episode_prompt(task: Task, target: str | None, settings: EpisodeSettings, single_turn: bool = False) -> tuple[str, str]:
    """The system prompt and the task prompt, with how this environment takes the solution (or,
    ``single_turn``, without it: the caller says how the answer is given)."""
    hardware = resolve_target(target)
    if single_turn:
        return system_prompt(hardware), task_prompt(task, hardware)
    tools = "\n".join(f"- `{name}`: {what}" for name, what in TOOL_DESCRIPTIONS.items())
    how = (f"## In this environment\nYou act in steps, at most {settings.max_turns}, each one JSON action:\n"
           '- `{"kind": "tool", "tool": NAME, "arguments": {...}}` calls one of these tools; its answer comes back:\n'
           f"{tools}\n"
           f'- `{{"kind": "submit", "code": "..."}}` submits the whole `{task.solution_filename}`; the grader judges it on '
           f"every shape, hidden ones included, and its reward is yours. You have {settings.max_submissions} submission(s).\n"
           "Files are not written anywhere: the code you submit or pass to check and benchmark is the file.")
    return system_prompt(hardware), task_prompt(task, hardware) + "\n" + how + "\n"


class KernelEnvironment:
    """Episodes of Apex tasks graded through ``executor`` (not closed here: the caller owns it)."""

    def __init__(self, executor: Executor, settings: EpisodeSettings | None = None, curriculum: Curriculum | None = None,
                 grade_options: GradeOptions | None = None, policy: str = "policy") -> None:
        self.executor = executor
        self.settings = settings or EpisodeSettings()
        self.curriculum = curriculum
        self.grade_options = grade_options or GradeOptions()
        self.policy = policy
        self.task: Task | None = None
        self.episode_id = ""
        self.turn = 0
        self.submissions = 0
        self.done = True
        self.system = ""
        self.prompt = ""
        self._trajectory: Trajectory | None = None
        self._calls: list[AgentToolCall] = []
        self._started = 0.0

    # --- the episode ------------------------------------------------------------------------------

    def reset(self, task_id: str | None = None, progress: float = 0.0, episode_id: str | None = None) -> Observation:
        """A new episode on ``task_id``, or on a task the curriculum draws at ``progress`` (0..1)."""
        if task_id is not None:
            task = get_task(task_id)
        elif self.curriculum is not None:
            task = self.curriculum.sample(progress)[0]
        else:
            raise ApexUserError("reset needs a task_id, or an environment made with a curriculum to draw one")
        self.task, self.turn, self.submissions, self.done = task, 0, 0, False
        self.episode_id = episode_id or uuid.uuid4().hex[:12]
        self.system, self.prompt = episode_prompt(task, self.settings.target, self.settings)
        self._trajectory = Trajectory(trajectory_id=f"{task.id}-{self.episode_id}", run_id=f"rl-{self.episode_id}", task_id=task.id,
                                      kernel=task.kernel, target=self.settings.target or "local", agent=self.policy)
        self._calls, self._started = [], time.monotonic()
        return Observation(task_id=task.id, text=self.prompt, reward=0.0, done=False, turn=0, turns_left=self.settings.max_turns)

    def step(self, action: Submit | ToolCall | dict) -> Observation:
        """Carry out one action; a malformed one still takes a turn and says what was wrong."""
        if self.task is None or self.done:
            raise ApexUserError("this episode is over (or never began): reset before the next step")
        self.turn += 1
        if isinstance(action, dict):
            try:
                action = ACTION.validate_python(action)
            except ValueError as error:
                return self._after_tool(f"error: not an action ({_first_error(error)}); send "
                                        '{"kind": "tool", "tool": ..., "arguments": {...}} or {"kind": "submit", "code": ...}',
                                        error=str(_first_error(error)))
        if isinstance(action, ToolCall):
            return self._tool(action)
        return self._submit(action)

    @property
    def trajectory(self) -> Trajectory | None:
        return self._trajectory

    # --- steps ------------------------------------------------------------------------------------

    def _tool(self, call: ToolCall) -> Observation:
        assert self.task is not None
        try:
            text, error = run_tool(call.tool, call.arguments, self.task, self.executor, self.settings.target), None
        except ApexUserError as problem:
            text, error = f"error: {problem}", str(problem)
        text = text[: self.settings.tool_reply_chars]
        self._calls.append(AgentToolCall(name=call.tool, arguments=_json(call.arguments)[:500], ok=error is None, result=text[:300]))
        return self._after_tool(text, error)

    def _after_tool(self, text: str, error: str | None = None) -> Observation:
        assert self.task is not None
        if self.turn >= self.settings.max_turns:
            self.done = True
            text += f"\n\nThe episode is over: {self.settings.max_turns} turns without a submission."
            self._save()
            return self._observation(text, NO_SOLUTION_REWARD, error=error)
        return self._observation(text, 0.0, error=error)

    def _submit(self, submit: Submit) -> Observation:
        assert self.task is not None and self._trajectory is not None
        self.submissions += 1
        result = grade_code(self.executor, self.task, submit.code, self.grade_options, self.settings.target)
        grade = summarize(result, Path(result.solution_path or self.task.solution_filename))
        self._trajectory.iterations.append(TrajectoryStep(
            iteration=self.submissions, model=self.policy, system_prompt_sha256=_sha256(self.system), prompt=self.prompt,
            feedback="", solution_code=submit.code, grade=grade, reward=result.rl_reward,
            agent=AgentRun(backend="rl-environment", solution_path=self.task.solution_filename, wrote_solution=True,
                           elapsed_s=round(time.monotonic() - self._started, 3), turns=self.turn, tool_calls=list(self._calls))))
        self._calls = []
        self.done = self.submissions >= self.settings.max_submissions or self.turn >= self.settings.max_turns
        text = "\n".join([f"outcome: {grade.outcome}", f"correct: {grade.correct}",
                          *([f"speedup: {grade.speedup:.3f}x"] if grade.speedup is not None else []),
                          f"reward: {result.rl_reward}", *([f"reason: {grade.reason}"] if grade.reason else [])])
        if self.done:
            self._save()
        return self._observation(text, result.rl_reward, grade=grade)

    def _observation(self, text: str, reward: float | None, **fields: object) -> Observation:
        assert self.task is not None
        return Observation(task_id=self.task.id, text=text, reward=reward, done=self.done, turn=self.turn,
                           turns_left=max(self.settings.max_turns - self.turn, 0), **fields)  # type: ignore[arg-type]

    def _save(self) -> None:
        if self._trajectory is None:
            return
        best = [s for s in self._trajectory.iterations if s.reward is not None]
        self._trajectory.best_iteration = max(best, key=lambda s: s.reward or 0.0).iteration if best else None
        self._trajectory.stop_reason = ("submitted" if self.submissions else f"{self.settings.max_turns} turns without a submission")
        if self.settings.record_dir:
            self._trajectory.save(Path(self.settings.record_dir) / self._trajectory.run_id)


def tasks_for(task_ids: list[str] | None = None) -> list[Task]:
    """The tasks an environment may draw from: the named ones, or the whole catalogue."""
    return [get_task(t) for t in task_ids] if task_ids else list(all_tasks().values())


def _first_error(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg')}".lstrip(": ")
    return str(error)


def _json(value: object) -> str:
    return json.dumps(value, default=str)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
