"""The report stage: report.md and report.html (``apex_core.pipeline.report``)."""

from __future__ import annotations

from apex_core.pipeline.state import RunState
from apex_core.progress import Progress

def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.pipeline.report import write_reports

    paths = write_reports(state)
    state.reports = [str(p) for p in paths]
    return ", ".join(str(p) for p in paths)
