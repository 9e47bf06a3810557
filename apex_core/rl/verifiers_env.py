"""Apex as a ``verifiers`` environment (Prime Intellect's classic API, as prime-rl loads it): the
rubric is Apex's grader, and ``vf.load_environment("apex-kernels", ...)`` finds it through the
``apex_kernels`` module this package installs.

Two variants. Single-turn: the model answers with the solution in a fenced block and the rubric
grades it. Multi-turn (``multi_turn=True``): a tool environment whose tools are the episode's own
(``rl/tools.py``: the source explorer, the docs search, ``check`` and ``benchmark`` of a draft on
the public shapes); the last fenced block of the conversation is graded. Either way the reward is
the grader's RL reward (``score.rl_reward``); a grading the infrastructure could not do scores 0.0
and is logged, since verifiers takes no "drop this sample".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.executors import Executor, make_executor
from apex_core.grader import GradeOptions
from apex_core.rl.completions import CompletionGrader
from apex_core.rl.environment import episode_prompt, tasks_for
from apex_core.rl.models import EpisodeSettings
from apex_core.rl.tools import run_tool
from apex_core.rl.trl_reward import SINGLE_TURN_NOTE
from apex_core.tasks import get_task

try:
    import verifiers as vf
    from datasets import Dataset
except ImportError as missing:  # pragma: no cover - the message is what the user sees
    raise ApexUserError("the apex-kernels verifiers environment needs verifiers: pip install -e '.[verifiers]'") from missing

LOG = logging.getLogger("apex.rl.verifiers")
TOOL_NOTE = ("## How to answer\nUse the tools to read sources and docs and to check or benchmark drafts (pass the whole file as "
             "code). End with the whole solution file in one fenced code block (```python, or ```cpp for a HIP task): the "
             "last such block of the conversation is graded.\n")


def load_environment(task_ids: list[str] | None = None, *, multi_turn: bool = False, max_turns: int = 8,
                     executor: Executor | str = "local", ray_address: str | None = None, timing: bool = True,
                     target: str | None = None, repeat: int = 1) -> Any:
    """The environment over ``task_ids`` (default: every task), each prompt ``repeat`` times."""
    grading = executor if isinstance(executor, Executor) else make_executor(executor, ray_address)
    grader = CompletionGrader(grading, GradeOptions(timing=timing), target)
    tasks = tasks_for(task_ids)
    system = ""
    rows = []
    for task in tasks:
        system, prompt = episode_prompt(task, target, EpisodeSettings(max_turns=max_turns), single_turn=True)
        prompt += TOOL_NOTE if multi_turn else SINGLE_TURN_NOTE
        rows.extend({"question": prompt, "answer": "", "info": {"task_id": task.id}, "task": "apex-kernels"} for _ in range(repeat))
    dataset = Dataset.from_list(rows)

    def apex_reward(completion: Any, info: dict[str, Any], **_: Any) -> float:
        """The grader's RL reward for the rollout's last fenced solution."""
        reward = grader.rewards([info["task_id"]], [completion])[0]
        if reward is None:
            LOG.warning("apex-kernels: %s", grader.problems[-1] if grader.problems else "a grading failed")
            return 0.0
        return reward

    rubric = vf.Rubric(funcs=[apex_reward], weights=[1.0])
    if not multi_turn:
        return vf.SingleTurnEnv(dataset=dataset, system_prompt=system, rubric=rubric)
    environment = _ApexToolEnv(grading, target, dataset=dataset, system_prompt=system, rubric=rubric, max_turns=max_turns)
    return environment


def _run(name: str, task_id: str, grading: Executor, target: str | None, **arguments: Any) -> str:
    """The episode tool ``name`` for the rollout's task; a bad argument is the tool's answer."""
    try:
        return run_tool(name, {k: v for k, v in arguments.items() if v is not None}, get_task(task_id), grading, target)[:8000]
    except ApexUserError as error:
        return f"error: {error}"


def _tools(grading: Executor, target: str | None) -> list[Callable[..., str]]:
    def find_kernel(task_id: str, name: str) -> str:
        """Where a kernel or function is defined in the installed packages.

        Args:
            name: the kernel's or function's name, as a profiler or the code shows it
        """
        return _run("find_kernel", task_id, grading, target, name=name)

    def read_source(task_id: str, location: str, context: int = 20) -> str:
        """Numbered source lines of an installed package's file.

        Args:
            location: PATH, PATH:LINE or PATH:START-END, or a function's name
            context: lines shown before and after PATH:LINE
        """
        return _run("read_source", task_id, grading, target, location=location, context=context)

    def grep_source(task_id: str, pattern: str, package: str | None = None) -> str:
        """Search the installed packages line by line with a regular expression.

        Args:
            pattern: a Python regular expression
            package: only this package, e.g. liger_kernel
        """
        return _run("grep_source", task_id, grading, target, pattern=pattern, package=package)

    def search_docs(task_id: str, query: str) -> str:
        """Search the skills, docs, hardware facts and kernel docstrings.

        Args:
            query: what you want to know
        """
        return _run("search_docs", task_id, grading, target, query=query)

    def check(task_id: str, code: str) -> str:
        """Grade a draft for correctness on the public shapes (no timing, no reward).

        Args:
            code: the whole solution file
        """
        return _run("check", task_id, grading, target, code=code)

    def benchmark(task_id: str, code: str) -> str:
        """Grade a draft for correctness and speed on the public shapes (no reward).

        Args:
            code: the whole solution file
        """
        return _run("benchmark", task_id, grading, target, code=code)

    return [find_kernel, read_source, grep_source, search_docs, check, benchmark]


class _ApexToolEnv(vf.StatefulToolEnv):
    """The multi-turn variant: the episode tools, each told the rollout's task id."""

    def __init__(self, grading: Executor, target: str | None, **kwargs: Any) -> None:
        super().__init__(tools=[], **kwargs)
        for tool in _tools(grading, target):
            self.add_tool(tool, args_to_skip=["task_id"])

    def update_tool_args(self, tool_name: str, tool_args: dict, messages: Any, state: Any, **kwargs: Any) -> dict:
        return {**tool_args, "task_id": state["info"]["task_id"]}
