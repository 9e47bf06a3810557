"""Gradings sent at once through the server, over HTTP and stdio, get the verdicts they get alone."""

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from apex_core.grader import GradeOptions, grade
from apex_core.tasks import get_task

REPO_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("concurrent_grading", REPO_ROOT / "benchmarks" / "concurrent_grading.py")
load = importlib.util.module_from_spec(_spec)
sys.modules["concurrent_grading"] = load
_spec.loader.exec_module(load)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_honest_wrong_and_tampering_solutions_graded_at_once_get_their_sequential_verdicts(tmp_path):
    task = get_task("cpu-mini__rms_norm")
    (tmp_path / "alone").mkdir()
    for kind, path in load.write_solutions(tmp_path / "alone", 1):
        alone = grade(task, path, GradeOptions(warm_pool=False))
        assert alone.outcome.value == load.EXPECTED[kind], (kind, alone.reason)

    (tmp_path / "http").mkdir()
    (tmp_path / "stdio").mkdir()
    jobs_http = load.write_solutions(tmp_path / "http", 2)
    jobs_stdio = load.write_solutions(tmp_path / "stdio", 2)
    verdicts, _ = asyncio.run(
        load.run_load(task.id, jobs_http, jobs_stdio, tmp_path / "cache", tmp_path / "server.log")
    )

    assert len(verdicts) == 12
    differing = [(v.transport, v.kind, v.outcome, v.reason or v.error) for v in verdicts if v.outcome != load.EXPECTED[v.kind]]
    assert not differing
    honest = [v for v in verdicts if v.kind == "honest"]
    assert all(v.speedup and v.speedup > 1 for v in honest)
