"""The live view of ``apex run``: the table shows every stage and each kernel's progress, and the
runner tells the view about every change of the state."""

from __future__ import annotations

import pytest
from rich.console import Console

from apex_core.cli.live_run import run_table
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.runner import run_pipeline
from apex_core.pipeline.state import STAGES

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do


def test_the_table_shows_each_stage_and_each_kernel_as_the_run_changes(tmp_path):
    seen = []
    state = run_pipeline(RunConfig(workload="cpu-mini", top_k=1, leaderboard=False), tmp_path, only=("identify",),
                         on_save=lambda s: seen.append((s.stages["identify"].status, len(s.kernels))))
    assert ("running", 0) in seen and seen[-1] == ("done", 1)
    console = Console(record=True, width=160)
    console.print(run_table(state))
    text = console.export_text()
    assert all(name in text for name in STAGES) and "cpu-mini__rms_norm" in text and "iteration 0/3" in text
    assert "1 kernel(s) to optimize" in text
