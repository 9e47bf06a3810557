"""Patched-in code runs confined (issue 28, class 1): a solution graded ``ok`` that, once patched in,
tries to write a ``.pth`` into site-packages, write outside its sandbox and reach a local socket
from the in-model check, a final benchmark's worker or the accuracy gate gets none of it, and its
patch still passes on its merits. Only an explicit
``unconfined=True`` (``--unconfined``) lets it through, which the journal records.

The confinement is the grader's own (``apex_core.grader.isolation.confined`` starts the child through the
reaper and the sandbox); as an ordinary user that path is the user-namespace one, exercised by
tests/apex_core/grader/test_sandbox.py's unprivileged judge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apex_core.patcher import restore, status
from apex_core.patcher.apply import apply_solutions

from .conftest import SITE, connected, nothing_escaped, python_escapes

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
GOOD = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"


def _escaping_solution(folder: Path, port: int, marker: str) -> Path:
    """The canned (correct) solution, preceded by three escapes attempted at import time."""
    path = folder / "solution.py"
    path.write_text(python_escapes(folder, port, marker) + GOOD.read_text())
    return path


def test_the_in_model_check_the_benchmark_workers_and_the_accuracy_gate_run_patched_code_confined(tmp_path, listener):
    """Every process that imports the patched solution after grading: the check inside the model,
    a final benchmark's worker and the accuracy gate's patched model."""
    from apex_core.patcher.accuracy import accuracy_gate
    from apex_core.patcher.hold import bound_patch
    from apex_core.pipeline.stages.final.arms import Arm, BenchWorker
    from apex_core.pipeline.stages.final.worker import patched_files
    from apex_core.workloads import get_workload

    marker = tmp_path.name
    solution = _escaping_solution(tmp_path, listener.getsockname()[1], marker)
    try:
        (applied,) = apply_solutions([(TASK, solution)], tmp_path / "results")
        assert applied.applied, applied.reason
        nothing_escaped(marker, tmp_path, listener, "the check")
        assert "UNCONFINED" not in (status().active()[0].note or "")
        spec = get_workload("cpu-mini").resolved()
        worker = BenchWorker(Arm(name="candidate", patches=[bound_patch(TASK, solution, applied.point)]), spec,
                             patched_files(spec.stack))
        try:
            seconds, tokens = worker.step(seed=7)
        finally:
            worker.close()
        assert seconds > 0 and len(tokens) == spec.batch, "the worker ran the patched model"
        nothing_escaped(marker, tmp_path, listener, "a benchmark worker")
        report = accuracy_gate(get_workload("cpu-mini"), tmp_path / "results", prompts=1, tokens=2)
        assert report.passed and report.confined, report.verdict
        nothing_escaped(marker, tmp_path, listener, "the accuracy gate")
    finally:
        restore()
        (SITE / f"apex_escape_{marker}.pth").unlink(missing_ok=True)


def test_only_an_explicit_unconfined_check_lets_the_same_code_out_and_the_journal_says_so(tmp_path, listener):
    marker = tmp_path.name
    solution = _escaping_solution(tmp_path, listener.getsockname()[1], marker)
    try:
        (applied,) = apply_solutions([(TASK, solution)], tmp_path / "results", unconfined=True)
        assert applied.applied, applied.reason
        assert (tmp_path / f"escaped-{marker}").exists() and connected(listener), "the probe itself must work"
        assert "checked UNCONFINED" in (status().active()[0].note or "")
    finally:
        restore()
        (SITE / f"apex_escape_{marker}.pth").unlink(missing_ok=True)
