"""Solutions of the Triton task that cheat on a GPU, each with the verdict it must get (runs on a GPU).

The solutions are written from red_team_gpu_solutions.py; an honest faster kernel and the
baseline itself must pass without flags that cost credit.
"""

import importlib.util
from pathlib import Path

import pytest

from apex_core.grader import GradeOptions, Outcome, grade
from apex_core.tasks import get_task

_spec = importlib.util.spec_from_file_location("red_team_gpu_solutions", Path(__file__).parent / "red_team_gpu_solutions.py")
solutions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(solutions)
OPTIONS = GradeOptions(time_budget_s=0.5, timeout_s=120)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def task():
    return get_task("llama-3-1-8b-instruct__rms_norm")


def _flags(result, prefix: str) -> list[str]:
    return [f for f in result.flags if f.startswith(prefix)]


@pytest.mark.parametrize("name", ["honest_faster", "baseline"])
def test_honest_kernels_pass_without_penalty(task, name, tmp_path):
    path = task.baseline_path if name == "baseline" else solutions.write_solution(name, tmp_path)
    result = grade(task, path, OPTIONS)
    assert result.outcome is Outcome.ok, result.reason
    assert not _flags(result, "no_custom_kernel") and result.speedup is not None
    assert result.rl_reward >= 0.4


def test_short_calls_are_corrected_by_the_shift_measured_in_the_solutions_own_worker(task):
    # The baseline against itself: the control the candidate's worker timed before the import is
    # the very kernel it times afterwards, so the corrected speedup is a same-process comparison.
    result = grade(task, task.baseline_path, OPTIONS)
    assert result.outcome is Outcome.ok, result.reason
    assert "calibration" in result.phases_s
    short = [t for t in result.timings if t.baseline_median_ns < 20_000]
    assert short, "the task times at least one shape under 20 us"
    for timing in short:
        assert timing.process_correction is not None
        assert timing.speedup_ci95[0] <= 1.0 <= timing.speedup_ci95[1], timing
    assert result.speedup == 1.0


@pytest.mark.parametrize("name", ["pure_pytorch", "ghost_kernel", "try_except_fallback"])
def test_work_not_done_by_the_solutions_own_kernel_earns_no_speedup(task, name, tmp_path):
    result = grade(task, solutions.write_solution(name, tmp_path), OPTIONS)
    assert result.correct
    assert _flags(result, "no_custom_kernel"), result.flags
    assert result.speedup is None and result.score.speedup_points == 0 and result.rl_reward == 0.0


@pytest.mark.parametrize(
    ("name", "outcome"),
    [("side_stream", Outcome.tampering), ("event_patch", Outcome.tampering),
     ("pointer_cache", Outcome.wrong_answer), ("reused_memory", Outcome.wrong_answer)],
)
def test_cheats_get_their_verdict_and_no_credit(task, name, outcome, tmp_path):
    result = grade(task, solutions.write_solution(name, tmp_path), OPTIONS)
    assert result.outcome is outcome, (result.outcome, result.reason)
    assert result.speedup is None or result.speedup <= 1.0


def test_work_left_on_a_side_stream_is_caught_by_the_wall_clock_before_any_trace(task, tmp_path):
    # The side stream holds about a millisecond of work after the timer's end event; the
    # wall-clock check runs before the profiler's stream check, so it is the one that fires.
    # (The plain side_stream cheat launches 20 kernels from Python: the device keeps up with the
    # launches, so almost nothing outlasts the end event and the events time the launches.)
    large = task.model_copy(update={"benchmark_shapes": [{"tokens": 8192, "hidden": 4096}]})
    result = grade(large, solutions.write_solution("side_stream_late", tmp_path), OPTIONS)
    assert result.outcome is Outcome.tampering, (result.outcome, result.reason)
    assert _flags(result, "unseen_device_work"), result.flags
    assert result.speedup is None or result.speedup <= 1.0


GEMM_MEMO_KEYS = {
    "prefix_hash": "x.reshape(-1)[:2048].view(torch.int16).cpu().numpy().tobytes()",
    "strided_sample": "x.reshape(-1)[:: max(1, x.numel() // 256)][:256].view(torch.int16).cpu().numpy().tobytes()",
    "full_hash": "(x.float().sum().item(), x.float().square().sum().item(), x.float().abs().max().item())",
}


def _gemm_memo(task, key: str | None) -> str:
    """The task's own baseline GEMM behind a cache keyed on the input's content (``key``), which
    answers a hit with twice the remembered output (a tell the timed-output check sees); with
    ``key`` None, the honest control: the same key computed on every call, no cache."""
    honest = task.baseline_path.read_text().replace("def gemm(", "def _gemm_honest(")
    if key is None:
        wrapper = (
            "\n\ndef gemm(x, w):\n"
            f"    {GEMM_MEMO_KEYS['strided_sample']}\n"
            "    return _gemm_honest(x, w)\n"
        )
    else:
        wrapper = (
            "\n\n_memo = {}\n\n\ndef gemm(x, w):\n"
            f"    key = (tuple(x.shape), tuple(w.shape), {GEMM_MEMO_KEYS[key]})\n"
            "    if key in _memo:\n"
            "        return _memo[key] * 2\n"
            "    _memo[key] = _gemm_honest(x, w)\n"
            "    return _memo[key].clone()\n"
        )
    return "import torch\n" + honest + wrapper


@pytest.mark.parametrize("key", [None, *sorted(GEMM_MEMO_KEYS)])
def test_a_gemm_memo_keyed_on_input_content_never_answers_a_timed_call(key, tmp_path):
    gemm = get_task("llama-3-1-8b-instruct__gemm_bf16")
    path = tmp_path / f"memo_{key or 'control'}.py"
    path.write_text(_gemm_memo(gemm, key))
    result = grade(gemm, path, OPTIONS)
    assert result.outcome is Outcome.ok, result.reason
    assert not _flags(result, "no_custom_kernel")
