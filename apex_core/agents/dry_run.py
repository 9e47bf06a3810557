"""The dry-run agent: submits a stored, known-good solution instead of calling a model."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from apex_core.agents.base import AgentRun
from apex_core.errors import AgentUnavailableError, ApexUserError
from apex_core.tasks.schema import Task

CANNED_DIR = Path(__file__).resolve().parent / "canned"


def canned_task_ids() -> list[str]:
    return sorted(p.stem for p in CANNED_DIR.glob("*.py"))


class DryRunAgent:
    name = "dry-run"

    def __init__(self, overwrite: bool = False) -> None:
        # Replace a solution file that differs from the stored one (someone's own work, otherwise kept).
        self.overwrite = overwrite

    def preflight(self, task: Task, solution_path: Path) -> None:
        """Refuse, before anything is written, what ``run`` could not do or should not do."""
        canned = self._canned(task)
        if self.overwrite or not solution_path.exists():
            return
        try:
            same = solution_path.is_file() and solution_path.read_bytes() == canned.read_bytes()
        except OSError:
            same = False
        if not same:
            raise ApexUserError(
                f"{solution_path} already exists and is not the stored solution --dry-run writes (your own edits?); "
                f"grade it with 'apex grade --task {task.id} --solution {solution_path}', move it away, "
                "or pass --overwrite to replace it"
            )

    def _canned(self, task: Task) -> Path:
        canned = CANNED_DIR / f"{task.id}.py"
        if not canned.is_file():
            raise AgentUnavailableError(
                f"--dry-run has no stored solution for {task.id}; tasks with one: {', '.join(canned_task_ids())}"
            )
        return canned

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        started = time.monotonic()
        self.preflight(task, solution_path)
        canned = self._canned(task)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(canned, solution_path)
        return AgentRun(
            backend=self.name,
            solution_path=str(solution_path),
            wrote_solution=True,
            elapsed_s=round(time.monotonic() - started, 3),
            summary=f"wrote the stored solution {canned.name}",
        )
