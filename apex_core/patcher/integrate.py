"""``apex integrate``: choose the winners among graded solutions and patch them in.

A winner is a grading that is ``ok`` and correct, carries no flag, was confined (an unconfined
verdict is only as trustworthy as the solution), credits a speedup of at least ``min_speedup``,
and whose speedup interval's lower bound (the grader's ``speedup_ci95``) is above 1.0. Per task the fastest winner is kept; its file must still be the one graded (same
sha256), so a solution edited after its grading is never integrated on the old verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from apex_core.errors import ApexUserError
from apex_core.grader.result import GradeResult
from apex_core.grader.solution_file import file_hash
from apex_core.patcher.apply import AppliedPatch, apply_solutions
from apex_core.patcher.points import point_for
from apex_core.progress import Progress
from apex_core.score import INTEGRATION_THRESHOLD
from apex_core.tasks import get_task


class Candidate(BaseModel):
    task_id: str
    solution: str
    speedup: float | None
    lower_bound: float | None
    eligible: bool
    why_not: str = ""
    result_file: str


def lower_bound(result: GradeResult) -> float | None:
    return result.speedup_ci95[0] if result.speedup_ci95 else None


def judge(result: GradeResult, source: Path, min_speedup: float) -> Candidate:
    low = lower_bound(result)
    reasons = []
    if result.outcome != "ok" or not result.correct:
        reasons.append(f"outcome {result.outcome}")
    if result.flags:
        reasons.append(f"flagged {', '.join(result.flags)}")
    if result.provenance.unconfined:
        reasons.append("graded unconfined")
    if result.speedup is None or result.speedup < min_speedup:
        reasons.append(f"speedup {result.speedup or 0:.3f}x below {min_speedup:g}x")
    if low is None or low <= 1.0:
        reasons.append(f"interval lower bound {low or 0:.3f}x not above 1.0")
    solution = Path(result.solution_path)
    if not solution.is_file():
        reasons.append("the solution file is gone")
    elif file_hash(solution) != result.provenance.solution_hash:
        reasons.append("the solution changed since it was graded")
    return Candidate(task_id=result.task_id, solution=str(solution), speedup=result.speedup, lower_bound=low,
                     eligible=not reasons, why_not="; ".join(reasons), result_file=str(source))


def find_gradings(folder: Path) -> list[tuple[GradeResult, Path]]:
    """Every grade result (``apex grade --json`` output, the grader's result files) under ``folder``."""
    if not folder.exists():
        raise ApexUserError(f"--results {folder}: no such folder; give the folder holding the gradings (apex grade --json > FILE)")
    found = []
    for path in sorted(folder.rglob("*.json")):
        try:
            data = json.loads(path.read_bytes())
        except (ValueError, OSError):
            continue
        for item in data if isinstance(data, list) else [data]:  # apex grade --json prints a list
            try:
                found.append((GradeResult.model_validate(item), path))
            except ValidationError:
                continue
    return found


class IntegrationReport(BaseModel):
    candidates: list[Candidate]
    winners: list[Candidate]
    patches: list[AppliedPatch]


def integrate(results: Path, min_speedup: float = INTEGRATION_THRESHOLD, *, patch_results_root: Path | None = None,
              kernel_stacks: tuple[str, ...] = (), progress: Progress | None = None) -> IntegrationReport:
    """Patch in the winners of the gradings under ``results``; ``kernel_stacks``: the workload's
    ``--kernels``, whose points are used where the task has one."""
    if not min_speedup > 0:
        raise ApexUserError(f"--min-speedup {min_speedup:g}: give a speedup above 0, e.g. 1.05")
    candidates = [judge(result, path, min_speedup) for result, path in find_gradings(results)]
    best: dict[str, Candidate] = {}
    for candidate in candidates:
        if candidate.eligible and (candidate.task_id not in best or (candidate.speedup or 0) > (best[candidate.task_id].speedup or 0)):
            best[candidate.task_id] = candidate
    winners = []
    for candidate in sorted(best.values(), key=lambda c: c.task_id):
        try:
            point_for(get_task(candidate.task_id), kernel_stacks=kernel_stacks)
        except ApexUserError as error:  # a winner with no patch point here is reported, not fatal
            candidate.eligible, candidate.why_not = False, str(error)
            continue
        winners.append(candidate)
    patches = apply_solutions([(w.task_id, Path(w.solution)) for w in winners], patch_results_root or results,
                              kernel_stacks=kernel_stacks, progress=progress) if winners else []
    return IntegrationReport(candidates=candidates, winners=winners, patches=patches)
