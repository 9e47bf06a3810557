"""Rewards for a batch of model completions, as trainers that score whole answers want them: each
completion's solution is taken out of its text, every one is graded at once through the executor
(the executor schedules them onto its devices), and the rewards come back in the batch's order.

Nothing here raises into a trainer: a completion without code earns ``NO_SOLUTION_REWARD``; a
grading the infrastructure could not do, or a task id the catalogue does not have, gives None (the
sample is dropped, as ``rl_reward`` documents) and is counted in ``CompletionGrader.problems``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.executors import Executor, GradedSolution, GradingRequest, SolutionContent
from apex_core.grader import GradeOptions
from apex_core.rl.environment import NO_SOLUTION_REWARD
from apex_core.tasks import get_task

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """A completion as text: a string as it is; a conversation (TRL's conversational format, a list
    of {"role", "content"} messages) as its assistant messages joined."""
    if isinstance(completion, str):
        return completion
    return "\n".join(str(m.get("content") or "") for m in completion if isinstance(m, dict) and m.get("role") == "assistant")


def extract_code(completion: str | Sequence[dict[str, Any]], language: str = "python") -> str | None:
    """The solution in a completion: the last fenced block in the task's language (a ```python or
    ```cpp/```hip block; an unlabelled fence counts too), or None when there is no fenced block."""
    text = completion_text(completion)
    wanted = {"python": {"python", "py", "triton", ""}, "hip": {"cpp", "c++", "hip", "cuda", ""}}.get(language, {language, ""})
    blocks = [body for label, body in _FENCE.findall(text) if label.lower() in wanted]
    code = blocks[-1].strip() if blocks else ""
    return code + "\n" if code else None


class CompletionGrader:
    """Grades (task id, completion) pairs through ``executor`` (owned by the caller)."""

    def __init__(self, executor: Executor, options: GradeOptions | None = None, target: str | None = None) -> None:
        self.executor = executor
        self.options = options or GradeOptions()
        self.target = target
        self.problems: list[str] = []
        self._lock = threading.Lock()

    def rewards(self, task_ids: Sequence[str], completions: Sequence[str | Sequence[dict[str, Any]]]) -> list[float | None]:
        """One reward per completion, in order; all gradings are submitted before any is awaited."""
        if len(task_ids) != len(completions):
            self._problem(f"{len(task_ids)} task ids for {len(completions)} completions: every completion needs its task id")
            return [None] * len(completions)
        pending: list[Future[GradedSolution] | float | None] = [self._submit(t, c) for t, c in zip(task_ids, completions)]
        return [self._reward(p) for p in pending]

    def _submit(self, task_id: str, completion: str | Sequence[dict[str, Any]]) -> Future[GradedSolution] | float | None:
        try:
            task = get_task(task_id)
        except (ApexUserError, KeyError) as error:
            self._problem(f"{task_id}: {error}")
            return None
        code = extract_code(completion, task.language)
        if code is None:
            return NO_SOLUTION_REWARD
        request = GradingRequest(task_id=task.id, solution=SolutionContent(name=task.solution_filename, content=code.encode()),
                                 options=self.options, target=self.target if task.needs_gpu else None)
        try:
            return self.executor.submit(request)
        except (ApexUserError, ValueError) as error:
            self._problem(f"{task_id}: {error}")
            return None

    def _reward(self, pending: Future[GradedSolution] | float | None) -> float | None:
        if not isinstance(pending, Future):
            return pending
        try:
            return pending.result().result.rl_reward
        except Exception as error:  # an executor closed or a node lost: the sample is dropped, the trainer goes on
            self._problem(f"grading failed: {error}")
            return None

    def _problem(self, message: str) -> None:
        with self._lock:
            self.problems.append(message)
