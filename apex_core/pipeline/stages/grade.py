"""The grade stage: a fresh, uncached grading of each kernel's best solution."""

from __future__ import annotations

import json
from pathlib import Path

from apex_core.grader import GradeOptions
from apex_core.pipeline.optimize import grade_with_retries, summarize
from apex_core.pipeline.stages.common import GRADINGS_DIR, Skip, grading_executor
from apex_core.pipeline.state import RunState
from apex_core.progress import Progress, reporter

def run(state: RunState, progress: Progress | None) -> str:
    """Grade each kernel's best solution again, uncached: the loop kept the best of several noisy
    measurements, and a fresh one is what integration and the scores use."""
    candidates = [k for k in state.kernels if k.best_solution]
    if not candidates:
        raise Skip("no iteration left a correct solution")
    folder = state.folder / GRADINGS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    report = reporter(progress)
    with grading_executor(state.config) as executor:
        for index, record in enumerate(candidates):
            report(index / len(candidates), f"grading the best solution of {record.task_id}")
            at = index / len(candidates)
            result, _ = grade_with_retries(record.task_id, Path(record.best_solution or ""), GradeOptions(), executor,
                                           state.config.gpu, said=lambda message, at=at: report(at, message))
            result_file = folder / f"{record.task_id}.json"
            result_file.write_text(json.dumps([result.model_dump(mode="json")], indent=2), encoding="utf-8")
            record.final = summarize(result, result_file)
    return "; ".join(f"{k.task_id} {k.final.outcome} {k.final.speedup or 0:.3f}x score {k.final.score:.0f}"
                     for k in candidates if k.final)
