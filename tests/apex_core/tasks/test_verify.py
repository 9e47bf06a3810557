"""``apex tasks verify`` on this CPU machine: correctness through the real grader, nothing timed."""

import json

import pytest

from apex_core.tasks import get_task
from apex_core.tasks.verify import verify_task


def test_the_cpu_task_verifies_with_its_baseline_and_reference_solution():
    verdict = verify_task(get_task("cpu-mini__rms_norm"), on_gpu=False)
    assert verdict.passed, verdict.problems
    assert verdict.baseline_outcome == "ok" and verdict.solution_outcome == "ok"


@pytest.mark.slow
def test_a_triton_task_verifies_in_the_interpreter_at_its_small_shapes(apex_cli):
    done = apex_cli("tasks", "verify", "--task", "llama-3-1-8b-instruct__rms_norm", "--json", timeout=900)
    report = json.loads(done.stdout)
    task = report["tasks"][0]
    assert done.returncode == 0, task["problems"]
    assert report["timed"] is False and task["timed"] is False and task["passed"]


def test_verify_needs_exactly_one_selection(apex_cli):
    done = apex_cli("tasks", "verify")
    assert done.returncode == 2 and "exactly one of --task ID or --all" in done.stderr
