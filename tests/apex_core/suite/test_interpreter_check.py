"""Every Triton task's baseline and our reference solution are correct under the CPU interpreter.

Each task runs in its own process with TRITON_INTERPRET=1 (the variable must be set before Triton
is imported), at the task's small ``cpu_shapes``.
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
import json, sys
from pathlib import Path
from apex_core.tasks import get_task
from apex_core.suite.interpreter_check import check_source
task = get_task(sys.argv[1])
report = {}
for label, path in zip(("baseline", "reference_solution"), sys.argv[2:]):
    report[label] = [v.model_dump() for v in check_source(task, Path(path))]
print(json.dumps(report))
"""

TRITON_TASKS = sorted(t.id for t in all_tasks().values() if t.language == "triton")


def _run_check(task_id: str, *paths: Path) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, task_id, *map(str, paths)], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_triton_task_has_small_shapes_for_the_interpreter():
    assert [t for t in TRITON_TASKS if not get_task(t).cpu_shapes] == []


def test_every_task_ships_a_reference_solution():
    assert [t for t in all_tasks() if reference_solution_path(get_task(t)) is None] == []


@pytest.mark.parametrize("task_id", TRITON_TASKS)
def test_baseline_and_reference_solution_are_correct_under_the_interpreter(task_id):
    task = get_task(task_id)
    solution = reference_solution_path(task)
    paths = [task.baseline_path] + ([solution] if solution else [])
    report = _run_check(task_id, *paths)
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
