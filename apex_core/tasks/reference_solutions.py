"""Where our own optimized solution of each task lives.

Every task ships with a solution we wrote: it proves the task solvable, sets the bar and is the
SFT target of ``apex tasks export``. Graded agents must never see it, so prompts and tools never
name this directory, agent runs deny reads of it, and the grader's sandboxed user cannot enter it
(see ``apex_core.grader.process``).
"""

from __future__ import annotations

from pathlib import Path

from apex_core.tasks.schema import Task

REFERENCE_SOLUTIONS_DIR = Path(__file__).resolve().parents[2] / "reference_solutions"
DEMO_SOLUTIONS_DIR = Path(__file__).resolve().parents[1] / "agents" / "canned"
"""The CPU demo task's solution is the one the dry-run agent submits (it is public by design)."""


def reference_solution_path(task: Task) -> Path | None:
    """Our solution file for ``task``, or None where none is shipped."""
    for path in (REFERENCE_SOLUTIONS_DIR / task.id / task.solution_filename, DEMO_SOLUTIONS_DIR / f"{task.id}.py"):
        if path.is_file():
            return path
    return None
