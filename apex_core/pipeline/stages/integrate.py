"""The integrate stage, and ``apex integrate``: choose the winners among graded solutions and patch
them in; the stage then runs the accuracy gate on what was applied.

A result file under ``--results`` only names a grading; it counts when this installation's judge
signed exactly that grading of exactly that file (``gradings.grading_problems``: signed, confined,
ok, correct, unflagged, the file unchanged since, so a solution edited after its grading is never
integrated on the old verdict) and it credits a speedup of at least ``min_speedup`` whose interval's
lower bound (the grader's ``speedup_ci95``) is above 1.0. Files in an agent's workspace are not
taken (``gradings.in_agent_workspace``). Every result file found is reported with why it was not
taken; per task the fastest winner is kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from apex_core.errors import ApexUserError
from apex_core.grader import GradeResult, GradingLedger
from apex_core.patcher.apply import AppliedPatch, apply_solutions
from apex_core.patcher.gradings import WORKSPACES_FOLDER, grading_problems, in_agent_workspace
from apex_core.patcher.points import point_for
from apex_core.pipeline.stages.common import GRADINGS_DIR, Skip, workload_spec
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress
from apex_core.score import INTEGRATION_THRESHOLD
from apex_core.tasks import get_task

def run(state: RunState, progress: Progress | None) -> str:
    if state.config.tasks:
        raise Skip("optimizing the given tasks alone: nothing is integrated into a model")
    if not any(k.final for k in state.kernels):
        raise Skip("nothing was graded to integrate")
    report = integrate(state.folder / GRADINGS_DIR, state.config.min_speedup, patch_results_root=state.folder,
                       kernel_stacks=workload_spec(state).kernels, owned=state.whole_run, progress=progress)
    by_task = {c.task_id: c for c in report.candidates}
    applied = {p.task_id: p for p in report.patches}
    for record in state.kernels:
        patch = applied.get(record.task_id)
        record.integrated = bool(patch and patch.applied)
        candidate = by_task.get(record.task_id)
        record.integration_note = (f"patched at {patch.point}" if record.integrated and patch else
                                   patch.reason if patch else candidate.why_not if candidate else "not graded")
    if not any(k.integrated for k in state.kernels):
        raise Skip("no winner: " + "; ".join(f"{k.task_id}: {k.integration_note}" for k in state.kernels))
    gate = accuracy_stage_gate(state, progress)
    kept = ", ".join(k.task_id for k in state.kernels if k.integrated)
    if not kept:
        raise Skip(f"the accuracy gate rolled back every winner: {gate}")
    return f"patched in: {kept}; {gate}"


def accuracy_stage_gate(state: RunState, progress: Progress | None) -> str:
    """The accuracy gate on what integrate applied (``apex_core.patcher.accuracy``): the patched
    model against the original on the same prompts; a winner that makes it fail is rolled back and
    the reason put on its record, so benchmark-final measures only winners that keep the model's
    outputs."""
    from apex_core.patcher.accuracy import accuracy_gate

    report = accuracy_gate(workload_spec(state), state.folder, progress=progress)
    state.accuracy = {**report.model_dump(mode="json", exclude={"workload"}), "file": str(Path(report.results_dir) / "accuracy.json")}
    for culprit in report.culprits:
        record = state.kernel(culprit.task_id)
        record.integrated = False
        record.integration_note = f"rolled back by the accuracy gate: {culprit.reason}"[:600]
    return report.verdict


class Candidate(BaseModel):
    task_id: str
    solution: str
    speedup: float | None
    lower_bound: float | None
    eligible: bool
    why_not: str = ""
    result_file: str
    sha256: str | None = None
    """Of the file its grading graded: the bytes patched in must be these."""


def lower_bound(result: GradeResult) -> float | None:
    return result.speedup_ci95[0] if result.speedup_ci95 else None


def judge(result: GradeResult, source: Path, min_speedup: float, ledger: GradingLedger | None = None) -> Candidate:
    """The result file ``source``, holding ``result``, as a candidate: eligible, or why not (one line)."""
    low = lower_bound(result)
    if in_agent_workspace(source):
        reasons = [f"found in an agent's workspace ({WORKSPACES_FOLDER}/<task>/), where the agent writes: result files there are "
                   "never taken; integrate the gradings the judge wrote elsewhere (apex grade --json > FILE)"]
    else:
        reasons = grading_problems(result, ledger or GradingLedger())
        if result.speedup is None or result.speedup < min_speedup:
            reasons.append(f"speedup {result.speedup or 0:.3f}x below {min_speedup:g}x")
        if low is None or low <= 1.0:
            reasons.append(f"interval lower bound {low or 0:.3f}x not above 1.0")
    return Candidate(task_id=result.task_id, solution=str(Path(result.solution_path)), speedup=result.speedup, lower_bound=low,
                     eligible=not reasons, why_not="; ".join(reasons), result_file=str(source),
                     sha256=result.provenance.solution_hash)


def read_gradings(folder: Path) -> list[tuple[GradeResult, Path]]:
    """Every grade result (``apex grade --json`` output, the grader's result files) under ``folder``,
    those in agents' workspaces included; what they are worth is ``judge``'s to say."""
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


def find_gradings(folder: Path) -> list[tuple[GradeResult, Path]]:
    """The grade results under ``folder`` outside agents' workspaces (still to be verified: ``judge``)."""
    return [(result, path) for result, path in read_gradings(folder) if not in_agent_workspace(path)]


class IntegrationReport(BaseModel):
    candidates: list[Candidate]
    winners: list[Candidate]
    patches: list[AppliedPatch]


def integrate(results: Path, min_speedup: float = INTEGRATION_THRESHOLD, *, patch_results_root: Path | None = None,
              kernel_stacks: tuple[str, ...] = (), owned: bool = False, progress: Progress | None = None) -> IntegrationReport:
    """Patch in the winners of the gradings under ``results`` (each verified against the judge's
    ledger); ``kernel_stacks``: the workload's ``--kernels``, whose points are used where the task has one;
    ``owned``: as ``apply_solutions`` takes it."""
    if not min_speedup > 0:
        raise ApexUserError(f"--min-speedup {min_speedup:g}: give a speedup above 0, e.g. 1.05")
    ledger = GradingLedger()
    candidates = [judge(result, path, min_speedup, ledger) for result, path in read_gradings(results)]
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
                              kernel_stacks=kernel_stacks, owned=owned, progress=progress,
                              graded_sha256={w.task_id: w.sha256 for w in winners if w.sha256}) if winners else []
    return IntegrationReport(candidates=candidates, winners=winners, patches=patches)
