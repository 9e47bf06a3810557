"""``apex tasks verify`` on this CPU machine: correctness through the real grader, nothing timed."""

import json

import pytest

from apex_core.tasks import get_task
from apex_core.suite.verify import verify_task


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


def _timed(overall: float, interval: tuple[float, float], shapes: list[tuple[float, tuple[float, float]]]):
    from apex_core.grader.result import GradeResult, ShapeTiming

    timings = [
        ShapeTiming(shape={"tokens": 2**i}, baseline_median_ns=1000.0, solution_median_ns=1000.0 / s, speedup=s,
                    speedup_ci95=ci, baseline_samples_ns=[1000], solution_samples_ns=[1000])
        for i, (s, ci) in enumerate(shapes)
    ]
    credited = 1.0 if interval[0] <= 1.0 <= interval[1] else overall
    return GradeResult.model_construct(speedup=credited, measured_speedup=overall, speedup_ci95=interval, timings=timings)


def test_a_tie_at_one_shape_within_noise_does_not_fail_a_faster_solution():
    from apex_core.suite.verify import speed_problems

    result = _timed(1.04, (1.02, 1.06), [(1.12, (1.10, 1.14)), (0.997, (0.99, 1.004))])
    assert speed_problems(result) == []


def test_a_significant_loss_at_one_shape_fails_the_solution():
    from apex_core.suite.verify import speed_problems

    result = _timed(1.02, (1.01, 1.03), [(1.07, (1.06, 1.08)), (0.967, (0.96, 0.975))])
    assert speed_problems(result) == ["reference solution is slower than the baseline at [{'tokens': 2}] (95% interval below 1.0)"]


def test_a_solution_not_significantly_faster_overall_fails():
    from apex_core.suite.verify import speed_problems

    result = _timed(1.003, (0.998, 1.008), [(1.003, (0.998, 1.008))])
    assert "not significant" in speed_problems(result)[0]
