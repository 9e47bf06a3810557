"""The minimal grader against honest, broken and misbehaving solutions of the CPU task."""

import os
import textwrap
from pathlib import Path

import pytest

from apex_core.errors import SolutionFileError
from apex_core.grader.calibration import calibrate
from apex_core.grader import GradeOptions, Outcome, grade
from apex_core.grader.timing import time_all
from apex_core.tasks import get_task

CANNED = Path(__file__).resolve().parents[3] / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
FAST = GradeOptions(time_budget_s=0.5, timeout_s=20)


@pytest.fixture
def task():
    return get_task("cpu-mini__rms_norm")


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text("import numpy as np\nimport os, signal, time\n\n" + textwrap.dedent(body))
    return path


def test_an_honest_vectorized_solution_is_correct_and_faster(task):
    result = grade(task, CANNED, FAST)
    assert result.outcome is Outcome.ok
    assert result.compiled and result.correct
    assert result.measured_speedup > 5 and result.speedup == result.measured_speedup
    assert result.speedup_ci95[0] > 1.0
    assert len(result.checks) == (len(task.test_shapes) + len(task.hidden_shapes)) * FAST.seeds_per_shape
    assert result.score.total > 120 and result.score.normalized == 1.0
    timing = result.timings[0]
    assert len(timing.baseline_samples_ns) >= FAST.min_samples and len(timing.solution_samples_ns) >= FAST.min_samples


def test_the_baseline_worker_kept_for_the_next_grading_has_let_go_of_its_staged_inputs(task):
    from apex_core.grader.grading import Grading
    from apex_core.grader.isolation import protocol
    from apex_core.grader.state import STATE

    assert grade(task, CANNED, FAST).outcome is Outcome.ok  # timed: the baseline's worker staged inputs
    idle = STATE.baseline_workers.check_out(Grading(task, CANNED, FAST)._baseline_key())
    assert idle is not None and idle.alive()
    try:
        reply, _ = idle.request(protocol.Warmup(min_calls=1, min_seconds=0.0))
        assert reply["ok"] is False and "nothing is staged" in reply["message"]
    finally:
        idle.close()


@pytest.mark.timing
def test_the_baseline_against_itself_is_credited_as_no_speedup(task):
    result = grade(task, task.baseline_path, GradeOptions(time_budget_s=1.0, timeout_s=20))
    assert result.correct
    assert 0.7 < result.measured_speedup < 1.4, (result.measured_speedup, result.speedup_ci95)
    if result.speedup_ci95[0] <= 1.0 <= result.speedup_ci95[1]:
        assert result.speedup == 1.0


@pytest.mark.parametrize(
    ("body", "outcome", "reason"),
    [
        ("def rms_norm(x, weight, eps)\n    return x\n", Outcome.compile_error, "SyntaxError at solution.py, line 4"),
        ("def normalize(x, weight, eps):\n    return x\n", Outcome.compile_error, "defines no callable 'rms_norm'"),
        ("raise ImportError('no triton here')\n", Outcome.compile_error, "ImportError: no triton here"),
        ("def rms_norm(x, weight, eps):\n    return undefined_name\n", Outcome.runtime_error, "line 5"),
        ("def rms_norm(x, weight, eps):\n    return x.copy()\n", Outcome.wrong_answer, "outside atol"),
        ("def rms_norm(x, weight, eps):\n    return x.tolist()\n", Outcome.wrong_answer, "returned builtins.list"),
        ("def rms_norm(x, weight, eps):\n    return x.astype(np.float64)\n", Outcome.wrong_answer, "dtype float64"),
        ("def rms_norm(x, weight, eps):\n    return x[:, :1].copy()\n", Outcome.wrong_answer, "shape"),
        ("def rms_norm(x, weight, eps):\n    return np.full_like(x, np.nan)\n", Outcome.wrong_answer, "NaN/Inf"),
        (
            "def rms_norm(x, weight, eps):\n"
            "    out = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps).astype(np.float32) * weight\n"
            "    x[...] = 0\n"
            "    return out.astype(np.float32)\n",
            Outcome.wrong_answer,
            "modified its inputs",
        ),
        ("def rms_norm(x, weight, eps):\n    os._exit(3)\n", Outcome.crash, "exit code 3"),
        ("def rms_norm(x, weight, eps):\n    os.kill(os.getpid(), signal.SIGKILL)\n", Outcome.crash, "signal 9"),
    ],
)
def test_broken_solutions_get_the_right_outcome_and_a_readable_reason(task, tmp_path, body, outcome, reason):
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is outcome
    assert reason in result.reason
    assert not result.correct and result.speedup is None
    assert result.score.speedup_points == 0


def test_a_solution_that_hangs_is_stopped_by_the_timeout(task, tmp_path):
    path = write(tmp_path, "def rms_norm(x, weight, eps):\n    while True:\n        pass\n")
    result = grade(task, path, GradeOptions(timeout_s=2, time_budget_s=0.5))
    assert result.outcome is Outcome.timeout
    assert result.elapsed_s < 30


def test_a_solution_correct_only_on_the_visible_shapes_fails_on_a_hidden_one(task, tmp_path):
    body = (
        "def rms_norm(x, weight, eps):\n"
        "    if x.shape[1] % 64:\n"
        "        return np.zeros_like(x)\n"
        "    ms = (x.astype(np.float64) ** 2).mean(-1, keepdims=True)\n"
        "    return (x / np.sqrt(ms + eps) * weight).astype(np.float32)\n"
    )
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.wrong_answer
    assert result.reason.startswith("hidden shape")
    assert any(c.hidden and not c.passed for c in result.checks)
    hidden_sizes = {shape["hidden"] for shape in task.hidden_shapes}
    assert all(c.shape == {} and c.max_error_index is None for c in result.checks if c.hidden)
    assert not any(f"hidden={size}" in result.reason or f"'hidden': {size}" in result.reason for size in hidden_sizes)


def test_the_solution_never_runs_in_the_judges_process(task, tmp_path):
    marker = tmp_path / "imported-by"
    body = f"open({str(marker)!r}, 'w').write(str(os.getpid()))\n" + CANNED.read_text()
    # Unconfined: a confined solution cannot write where the test reads (test_sandbox.py).
    grade(task, write(tmp_path, body), GradeOptions(timing=False, unconfined=True))
    assert int(marker.read_text()) != __import__("os").getpid()


@pytest.mark.parametrize(
    ("make", "complaint"),
    [
        (lambda p: p / "absent.py", "does not exist"),
        (lambda p: p, "is not a file"),
        (lambda p: (p / "solution.txt").write_text("x") and p / "solution.txt", "must be a .py file"),
        (lambda p: p / ("s" * 300 + ".py"), r"\.\.\.s+\.py \(\d+ characters\) cannot be opened: File name too long"),
        (lambda p: p / "sol\x00ution.py", "cannot be opened: embedded null byte|does not exist"),
    ],
)
def test_an_unusable_solution_path_is_a_user_error(task, tmp_path, make, complaint):
    with pytest.raises(SolutionFileError, match=complaint):
        grade(task, make(tmp_path))


def test_an_unreadable_solution_file_is_a_user_error(task, tmp_path, monkeypatch):
    path = write(tmp_path, "def rms_norm(x, weight, eps):\n    return x\n")
    real_read = Path.read_bytes

    def refuse(self):
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(SolutionFileError, match="is not readable: Permission denied"):
        grade(task, path)


def test_the_triton_baseline_is_graded_correct_in_the_cpu_interpreter_without_timing():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    small = task.model_copy(
        update={"test_shapes": [{"tokens": 2, "hidden": 4096}], "hidden_shapes": [{"tokens": 3, "hidden": 4096}]}
    )
    result = grade(small, task.baseline_path, GradeOptions(device="cpu", timeout_s=120))
    assert result.outcome is Outcome.ok and result.correct
    assert result.speedup is None and any(f.startswith("not_timed") for f in result.flags)
    assert result.score.total == 120
    assert result.provenance.timing_method == "not timed: Triton ran in the CPU interpreter, whose speed means nothing"


def test_a_grading_that_times_nothing_says_so_where_the_timing_method_would_be(task, tmp_path):
    timed = grade(task, CANNED, FAST)
    assert timed.timings and timed.provenance.timing_method.startswith("perf_counter_ns per call")
    checked = grade(task, CANNED, FAST.model_copy(update={"timing": False}))
    assert checked.provenance.timing_method == "not timed: correctness only"
    wrong = grade(task, write(tmp_path, "def rms_norm(x, weight, eps):\n    return x.copy()\n"), FAST)
    assert wrong.provenance.timing_method == "not timed: the grading ended before timing (wrong_answer)"


def test_a_kernel_that_assumes_adjacent_rows_fails_at_a_hidden_shape_where_rows_are_strided():
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    small = task.model_copy(
        update={"test_shapes": [{"tokens": 2, "hidden": 4096}], "hidden_shapes": [{"tokens": 3, "hidden": 4096}]}
    )
    solution = Path(__file__).resolve().parents[1] / "solutions" / "adjacent_rows_rms_norm.py"
    result = grade(small, solution, GradeOptions(device="cpu", timeout_s=120))
    assert result.outcome is Outcome.wrong_answer and result.reason.startswith("hidden shape")
    assert [c.passed for c in result.checks if not c.hidden] == [True, True]


def test_a_task_whose_reference_is_tolerance_sized_is_the_tasks_fault(task):
    from apex_core.tasks.schema import Tolerance

    loose = task.model_copy(update={"tolerances": {"float32": Tolerance(atol=100.0, rtol=0.0)}})
    result = grade(loose, CANNED, FAST)
    assert result.outcome is Outcome.infra_error
    assert "needs inputs with more signal" in result.reason
    assert result.rl_reward is None and result.score.total == 0


def test_the_magpie_backend_without_magpie_installed_is_a_user_error_before_anything_runs(monkeypatch):
    from apex_core.errors import ApexUserError
    from apex_core.grader import GradeOptions, grade

    monkeypatch.delenv("MAGPIE_ROOT", raising=False)
    with pytest.raises(ApexUserError, match="MAGPIE_ROOT"):
        grade(get_task("cpu-mini__rms_norm"), CANNED, GradeOptions(backend="magpie"))


def test_an_unknown_backend_on_the_command_line_is_one_clear_line(apex_cli):
    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(CANNED), "--backend", "nvbench")
    assert done.returncode == 2 and "unknown --backend 'nvbench'; use apex or magpie" in done.stderr


def test_the_baseline_compiles_into_a_cache_of_its_own_that_solutions_cannot_reach():
    from apex_core.grader import default_cache_dir, file_hash

    task = get_task("cpu-mini__rms_norm")
    result = grade(task, CANNED, GradeOptions(warm_pool=False, time_budget_s=0.05))
    assert result.outcome is Outcome.ok, result.reason
    cache = default_cache_dir() / "baseline-compile" / file_hash(task.baseline_path)[:16]
    assert cache.is_dir() and cache.stat().st_uid == os.getuid()


def test_the_shift_measured_in_the_solutions_worker_before_the_import_corrects_its_speedup(task):
    # On a GPU the judge does this itself (``calibration.calibrates``); the same steps on the CPU task:
    # the fresh worker times our baseline first, then loads the solution.
    from apex_core.grader import Grading

    run = Grading(task, CANNED, GradeOptions(warm_pool=False, time_budget_s=0.1, timeout_s=30))
    with run.start_worker() as candidate:
        calibrate(run, candidate, shorter_than_ns=1e12)  # the CPU task's calls count as short here
        run.load_into(candidate, CANNED, run.candidate_cache())
        timings = time_all(run, candidate)
    run.close()
    assert sorted(run.corrections) == list(range(len(task.timed_shapes)))
    for index, timing in enumerate(timings):
        factor, draws = run.corrections[index]
        assert timing.process_correction == factor > 0
        assert timing.speedup == pytest.approx(timing.baseline_median_ns / timing.solution_median_ns * factor)
        assert len(draws) == run.options.bootstrap_draws


def test_long_calls_are_not_calibrated(task):
    from apex_core.grader import Grading

    run = Grading(task, CANNED, GradeOptions(warm_pool=False, time_budget_s=0.1, timeout_s=30))
    with run.start_worker() as candidate:
        calibrate(run, candidate)  # the CPU baseline's call takes milliseconds
    run.close()
    assert run.corrections == {}


def test_a_worker_that_was_not_calibrated_gets_no_correction(task):
    from apex_core.grader import Grading

    run = Grading(task, CANNED, GradeOptions(warm_pool=False, time_budget_s=0.1, timeout_s=30))
    with run.start_worker() as calibrated:
        calibrate(run, calibrated, shorter_than_ns=1e12)
    with run.worker(CANNED, run.candidate_cache()) as fresh:  # as in a hardened re-measurement
        timings = time_all(run, fresh)
    run.close()
    assert run.corrections and all(t.process_correction is None for t in timings)


def test_a_shape_known_to_be_long_from_an_earlier_grading_is_not_even_staged(task, monkeypatch):
    from apex_core.grader import Grading
    from apex_core.grader.state import STATE

    run = Grading(task, CANNED, GradeOptions(warm_pool=False, time_budget_s=0.1, timeout_s=30))
    for shape in task.timed_shapes:
        monkeypatch.setitem(STATE.baseline_medians, run.baseline_median_key(shape), 2e12)
    with run.start_worker() as candidate:
        calibrate(run, candidate, shorter_than_ns=1e12)  # would calibrate every shape if it probed
    run.close()
    assert run.corrections == {}


def test_the_device_running_out_of_memory_in_the_judge_is_an_infra_error_of_that_grading_only(task, monkeypatch):
    import torch

    from apex_core.grader import grading

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 2.62 GiB. GPU 0 has a total capacity of 79.18 GiB of which "
            "1.82 GiB is free. Including non-PyTorch memory, this process has 714.00 MiB memory in use."
        )

    with monkeypatch.context() as patched:
        patched.setattr(grading.seeded, "draw", out_of_memory)
        result = grade(task, task.baseline_path, GradeOptions(timing=False))
    assert result.outcome is Outcome.infra_error
    assert "ran out of memory in the judge while drawing the inputs of" in result.reason
    assert "Tried to allocate 2.62 GiB" in result.reason and "Including" not in result.reason
    assert grade(task, task.baseline_path, GradeOptions(timing=False)).outcome is Outcome.ok  # the next one is unharmed
