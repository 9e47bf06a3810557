"""The dry-run agent: submits a stored, known-good solution instead of calling a model."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from apex_core.agents.base import AgentRun
from apex_core.errors import AgentUnavailableError
from apex_core.tasks.schema import Task

CANNED_DIR = Path(__file__).resolve().parent / "canned"


def canned_task_ids() -> list[str]:
    return sorted(p.stem for p in CANNED_DIR.glob("*.py"))


class DryRunAgent:
    name = "dry-run"

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        started = time.monotonic()
        canned = CANNED_DIR / f"{task.id}.py"
        if not canned.is_file():
            raise AgentUnavailableError(
                f"--dry-run has no stored solution for {task.id}; tasks with one: {', '.join(canned_task_ids())}"
            )
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(canned, solution_path)
        return AgentRun(
            backend=self.name,
            solution_path=str(solution_path),
            wrote_solution=True,
            elapsed_s=round(time.monotonic() - started, 3),
            summary=f"wrote the stored solution {canned.name}",
        )
