"""The integrate stage: patch the winners in (``apex_core.patcher.integrate``), then the accuracy
gate on what was applied."""

from __future__ import annotations

from pathlib import Path

from apex_core.pipeline.stages.common import GRADINGS_DIR, Skip, workload_spec
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress

def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.patcher.integrate import integrate

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
