"""A reward function for TRL's ``GRPOTrainer``: Apex's grader as the verifier of each completion.

TRL calls a reward function with the batch's ``prompts`` and ``completions`` and every other
column of the dataset as a list of the same length; ``apex_prompts`` makes a dataset whose rows
carry the ``task_id`` column this function reads. A None reward is TRL's "no reward for this
sample" (NaN, dropped from the mean): an infrastructure failure gives it, never an exception.

    from apex_core.rl.trl_reward import ApexReward, apex_prompts
    trainer = GRPOTrainer(model=..., reward_funcs=[ApexReward()], train_dataset=apex_prompts(["cpu-mini__rms_norm"]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apex_core.executors import Executor, make_executor
from apex_core.grader import GradeOptions
from apex_core.rl.completions import CompletionGrader
from apex_core.rl.environment import episode_prompt
from apex_core.rl.models import EpisodeSettings
from apex_core.tasks import get_task

SINGLE_TURN_NOTE = ("## How to answer\nAnswer with the whole solution file in one fenced code block (```python, or ```cpp for "
                    "a HIP task). Only the last such block is graded.\n")


class ApexReward:
    """``reward_funcs=[ApexReward()]``: grades a batch concurrently through a local executor, or
    the Ray cluster at ``ray_address`` with ``executor="ray"``; ``task_column`` names the dataset
    column holding each row's task id."""

    __name__ = "apex_reward"  # TRL names the logged metric after it (rewards/apex_reward/mean)

    def __init__(self, executor: Executor | str = "local", *, ray_address: str | None = None, options: GradeOptions | None = None,
                 target: str | None = None, task_column: str = "task_id") -> None:
        self.executor = executor if isinstance(executor, Executor) else make_executor(executor, ray_address)
        self.grader = CompletionGrader(self.executor, options, target)
        self.task_column = task_column
        self.last: list[float | None] = []
        """The rewards of the last batch, in its order (what the trainer received)."""

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **columns: Any) -> list[float | None]:
        task_ids = columns.get(self.task_column)
        if task_ids is None:
            self.grader.problems.append(f"the dataset has no {self.task_column!r} column; every row needs its task id")
            self.last = [None] * len(completions)
        else:
            self.last = self.grader.rewards(list(task_ids), list(completions))
        return list(self.last)

    def close(self) -> None:
        self.executor.close()


def apex_prompts(task_ids: Sequence[str], *, repeat: int = 1, conversational: bool = False,
                 target: str | None = None) -> Any:
    """A ``datasets.Dataset`` of the tasks' prompts (each ``repeat`` times) with their ``task_id``:
    plain text prompts, or system and user messages with ``conversational=True``."""
    from datasets import Dataset

    rows = []
    for task_id in task_ids:
        task = get_task(task_id)
        system, prompt = episode_prompt(task, target, EpisodeSettings(max_turns=1), single_turn=True)
        prompt += SINGLE_TURN_NOTE
        value: Any = [{"role": "system", "content": system}, {"role": "user", "content": prompt}] if conversational \
            else f"{system}\n\n{prompt}"
        rows.extend({"prompt": value, "task_id": task.id} for _ in range(repeat))
    return Dataset.from_list(rows)
