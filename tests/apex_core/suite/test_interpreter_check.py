"""Every Triton task's baseline and our reference solution are correct under the CPU interpreter.

The checks run in a child process with TRITON_INTERPRET=1 (the variable must be set before Triton
is imported), at each task's small ``cpu_shapes``. The tasks are dealt into ``SHARDS`` shards, each an
xdist group checked by one child (importing torch and Triton once per shard instead of once per
task, most of this module's time before), so the shards run on different workers at once; a
failure of one task's check is recorded for that task alone, and each task is still its own test.
Tasks whose check would be the same (``Task.cpu_check_hash``: the same code, reference, inputs,
parameters and tolerances at the same ``cpu_shapes``, as the GEMM tasks of models whose GPU shapes
differ) are checked once, and each of them is judged by that check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.tasks import all_tasks, get_task
from apex_core.tasks.reference_solutions import reference_solution_path

REPO_ROOT = Path(__file__).resolve().parents[3]

_CHECK = """
import json, sys, traceback
from pathlib import Path
from apex_core.tasks import get_task
from apex_core.suite.interpreter_check import check_source
reports = {}
for job in json.loads(sys.argv[1]):
    task = get_task(job["task"])
    try:
        reports[job["task"]] = {label: [v.model_dump() for v in check_source(task, Path(path))]
                                for label, path in zip(("baseline", "reference_solution"), job["paths"])}
    except Exception:
        reports[job["task"]] = {"error": traceback.format_exc()[-3000:]}
print(json.dumps(reports))
"""

TRITON_TASKS = sorted(t.id for t in all_tasks().values() if t.language == "triton")
SHARDS = 6
"""Three per xdist worker of two: short groups, so the last one to finish does not hold up the run."""


def _checked_as() -> dict[str, str]:
    """Task id -> the task whose check speaks for it (the first task of its CPU check, by id)."""
    first: dict[str, str] = {}
    return {t: first.setdefault(get_task(t).cpu_check_hash(), t) for t in TRITON_TASKS}


CHECKED_AS = _checked_as()
CHECKED = sorted(set(CHECKED_AS.values()))


def _shard(task_id: str) -> int:
    return CHECKED.index(CHECKED_AS[task_id]) % SHARDS


pytestmark = pytest.mark.timeout(1800)  # the first test of a shard waits for the whole shard's check
_REPORTS: dict[int, dict[str, dict]] = {}


def _run_checks(jobs: dict[str, list[Path]], timeout: float) -> dict[str, dict]:
    """Task id -> {label: verdicts}, or {"error": traceback} where the check itself failed."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT)}
    payload = json.dumps([{"task": task, "paths": [str(p) for p in paths]} for task, paths in jobs.items()])
    done = subprocess.run([sys.executable, "-c", _CHECK, payload], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_check(task_id: str, *paths: Path) -> dict:
    report = _run_checks({task_id: list(paths)}, timeout=900)[task_id]
    assert "error" not in report, report.get("error")
    return report


def _shard_report(shard: int, request: pytest.FixtureRequest) -> dict[str, dict]:
    """The baselines and reference solutions of one shard's tasks, checked in one child (once per
    worker); only the checks the tests selected in this session need (``-k gemma``: those alone)."""
    if shard not in _REPORTS:
        selected = {CHECKED_AS[item.callspec.params["task_id"]] for item in request.session.items
                    if item.originalname == request.node.originalname}
        jobs = {}
        for task_id in (t for t in CHECKED if _shard(t) == shard and t in selected):
            task = get_task(task_id)
            solution = reference_solution_path(task)
            jobs[task_id] = [task.baseline_path] + ([solution] if solution else [])
        _REPORTS[shard] = _run_checks(jobs, timeout=1800)
    return _REPORTS[shard]


def test_every_triton_task_has_small_shapes_for_the_interpreter():
    assert [t for t in TRITON_TASKS if not get_task(t).cpu_shapes] == []


def test_every_task_ships_a_reference_solution():
    assert [t for t in all_tasks() if reference_solution_path(get_task(t)) is None] == []


@pytest.mark.parametrize("task_id", [pytest.param(t, marks=pytest.mark.xdist_group(f"interpreter-check-{_shard(t)}"))
                                     for t in TRITON_TASKS])
def test_baseline_and_reference_solution_are_correct_under_the_interpreter(task_id, request):
    task = get_task(task_id)
    report = _shard_report(_shard(task_id), request)[CHECKED_AS[task_id]]
    assert "error" not in report, report.get("error")
    assert set(report) == {"baseline", "reference_solution"}, "both the baseline and our solution are checked"
    failures = {label: [v for v in verdicts if not v["passed"]] for label, verdicts in report.items()}
    assert failures == {label: [] for label in report}, failures
    runs_per_shape = 2 if task.strided_args else 1  # plain inputs, then row-strided ones
    assert all(len(v) == runs_per_shape * len(task.cpu_shapes) for v in report.values())


ADJACENT_ROWS_RMS_NORM = REPO_ROOT / "tests" / "apex_core" / "solutions" / "adjacent_rows_rms_norm.py"


def test_a_kernel_that_assumes_adjacent_rows_fails_the_row_strided_inputs_only():
    report = _run_check("llama-3-1-8b-instruct__rms_norm", ADJACENT_ROWS_RMS_NORM)["baseline"]
    plain, strided = report[0::2], report[1::2]
    assert all(v["passed"] for v in plain)
    assert not any(v["passed"] for v in strided) and "row-strided inputs" in strided[0]["message"]
