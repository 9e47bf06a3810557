"""The replay agent: the offline default of ``apex run``. It calls no model and needs no login.

Per task it submits, iteration after iteration, either the solutions of a recorded trajectory
(``replay_from``: a trajectory file ``apex run`` wrote, ``<run>/trajectories/<id>.json``) in their
order, the last one again once they run out, or our own solution of the task (the CPU demo's
public one, else the reference solution, which graded agents never see and this trusted process
may read). What it writes is graded like any agent's file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from apex_core.agents.base import AgentRun
from apex_core.errors import AgentUnavailableError, ApexUserError
from apex_core.tasks.schema import Task


class ReplayAgent:
    name = "replay"

    def __init__(self, replay_from: Path | None = None) -> None:
        self.recorded: dict[str, list[str]] = _read_trajectories(replay_from) if replay_from is not None else {}
        self.source = str(replay_from) if replay_from is not None else "our reference solutions"
        self._calls: dict[str, int] = {}

    def preflight(self, task: Task, solution_path: Path) -> None:
        self._solution_for(task, 0)

    def _solution_for(self, task: Task, index: int) -> tuple[str, str]:
        """(source code, where it came from) of the ``index``-th submission for ``task``."""
        if self.recorded:
            codes = self.recorded.get(task.id)
            if not codes:
                raise AgentUnavailableError(f"the replayed trajectories ({self.source}) hold no solution of {task.id}; "
                                            f"they hold {', '.join(sorted(self.recorded)) or 'none'}")
            chosen = min(index, len(codes) - 1)
            return codes[chosen], f"recorded solution {chosen + 1} of {len(codes)} from {self.source}"
        from apex_core.tasks.reference_solutions import reference_solution_path

        path = reference_solution_path(task)
        if path is None:
            raise AgentUnavailableError(f"no solution of ours for {task.id} to replay; give --replay-from a trajectory file")
        return path.read_text(encoding="utf-8"), f"our solution of {task.id}"

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        started = time.monotonic()
        # The iterations already kept in this workspace count too: a resumed run goes on with the next solution.
        index = max(self._calls.get(task.id, 0), len(list(solution_path.parent.glob("solution_iter*"))))
        code, origin = self._solution_for(task, index)
        self._calls[task.id] = index + 1
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        solution_path.write_text(code, encoding="utf-8")
        return AgentRun(backend=self.name, solution_path=str(solution_path), wrote_solution=True,
                        elapsed_s=round(time.monotonic() - started, 3), summary=f"replayed {origin}")


def _read_trajectories(path: Path) -> dict[str, list[str]]:
    """task id -> the solution code of each iteration, from one trajectory file or a folder of them."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise ApexUserError(f"--replay-from {path}: no trajectory file there; give a file or folder that 'apex run' wrote "
                            "(results/runs/<run-id>/trajectories/)")
    found: dict[str, list[str]] = {}
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            codes = [i["solution_code"] for i in data["iterations"] if i.get("solution_code")]
            task_id = data["task_id"]
        except (ValueError, KeyError, TypeError) as error:
            raise ApexUserError(f"--replay-from {file}: not a trajectory 'apex run' wrote ({type(error).__name__}: {error})") from None
        found.setdefault(task_id, []).extend(codes)
    return found
