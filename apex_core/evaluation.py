"""The CPU mini-evaluation, end to end: prompt → agent → solution file → grade → score report.

It is the smallest run of the whole loop and works on any machine: the default task is a naive
pure-Python RMSNorm, graded on the CPU. ``--dry-run`` swaps the LLM for a stored solution.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from apex_core.agents.base import Agent, AgentRun, preflight
from apex_core.errors import SolutionFileError
from apex_core.grader import GradeOptions, GradeResult, grade, result_without_solution
from apex_core.hardware.target import resolve_target
from apex_core.prompts import system_prompt, task_prompt
from apex_core.tasks import get_task

DEFAULT_EVAL_TASK = "cpu-mini__rms_norm"


class EvalReport(BaseModel):
    task_id: str
    target_arch: str
    prompt_path: str
    agent: AgentRun
    grade: GradeResult


def run_eval(
    agent: Agent,
    task_id: str = DEFAULT_EVAL_TASK,
    output_dir: Path = Path("output"),
    workspace: Path = Path("."),
    gpu: str | None = None,
    options: GradeOptions | None = None,
) -> EvalReport:
    """Prompt, agent, grade, report; a run that fails leaves ``output_dir`` as it found it."""
    task = get_task(task_id)
    target = resolve_target(gpu)
    task_dir = output_dir / task.id
    solution = task_dir / task.solution_filename
    preflight(agent, task, solution)  # refusals (a missing CLI, a file of the user's) come before any write
    prompt_path = task_dir / "prompt.md"
    with _undone_on_failure(task_dir, [prompt_path, solution, task_dir / "grade_result.json", task_dir / "agent_transcript.json"]):
        task_dir.mkdir(parents=True, exist_ok=True)
        system = system_prompt(target)
        prompt = task_prompt(task, target, output_dir=str(output_dir))
        prompt_path.write_text(f"<!-- system prompt -->\n{system}\n<!-- task prompt -->\n{prompt}", encoding="utf-8")
        run = agent.run(task, system, prompt, workspace, solution)
        options = options or GradeOptions(warm_pool=False)
        try:
            result = grade(task, solution, options)
        except SolutionFileError as missing:
            result = result_without_solution(task, solution, f"the agent left no usable solution: {missing}")
        (task_dir / "grade_result.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    return EvalReport(task_id=task.id, target_arch=target.arch, prompt_path=str(prompt_path), agent=run, grade=result)


@contextlib.contextmanager
def _undone_on_failure(folder: Path, files: list[Path]) -> Iterator[None]:
    """Put ``files`` back as they were (or remove them), and remove the folders created for them,
    when the block raises: a failed evaluation leaves no prompt or half a run behind."""
    before = {path: path.read_bytes() if path.is_file() else None for path in files}
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        yield
    except BaseException:
        for path, content in before.items():
            with contextlib.suppress(OSError):
                if content is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(content)
        for path in created:  # innermost first
            with contextlib.suppress(OSError):
                path.rmdir()  # only if empty: anything else in it is not ours to remove
        raise
