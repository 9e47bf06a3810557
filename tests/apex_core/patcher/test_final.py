"""``apex benchmark-final`` on cpu-mini: the original and the patched model alternate in one
session; our vectorized RMSNorm makes the model significantly faster, the interval says so, and
every patch is restored afterwards. A patch that makes the model badly slow is found by bisection
and left out of the measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher import restore, status
from apex_core.patcher.apply import apply_solutions
from apex_core.patcher.final import FINAL_FILE, MIN_PAIRS, as_first_benchmarked, benchmark_final, final_verdict, ratio_interval
from apex_core.workloads import get_workload

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
GOOD = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"


@pytest.fixture(autouse=True)
def _nothing_stays_patched():
    yield
    restore()  # a failed assertion must not leave the environment patched for the tests after it


def test_the_patched_cpu_mini_is_significantly_faster_and_is_restored_afterwards(tmp_path):
    (applied,) = apply_solutions([(TASK, GOOD)], tmp_path)
    assert applied.applied
    result = benchmark_final(get_workload("cpu-mini"), 6, tmp_path, warmup=1)
    assert result.significant and result.interval[0] > 1.0 and result.improvement > 0.5, result.verdict
    assert len(result.ratios) == 6 and result.interval_method == "order statistics" and result.verdict.startswith("faster by")
    assert status() is None, "the patches are restored after the final benchmark"
    stored = json.loads((Path(result.results_dir) / FINAL_FILE).read_text())
    assert stored["patches"] == [{"task_id": TASK, "solution": str(GOOD)}]


def test_nothing_patched_is_a_one_line_error():
    with pytest.raises(ApexUserError, match="nothing is patched"):
        benchmark_final(get_workload("cpu-mini"), 3, Path("unused"))


def test_two_pairs_that_disagree_are_no_significant_change_however_far_below_one_both_are():
    """Qwen3.5 on the H200 (2026-12-02): a bootstrap of the median called these "slower by 7.2%"."""
    low, high, confidence, method = ratio_interval([0.96084, 0.89465])
    assert method == "t on log ratios" and low < 1.0 < high and confidence == 0.95
    assert final_verdict(0.928, low, high, method, 2).startswith("no significant change: median ratio 0.928x (95% interval 0.589-1.459x, 2 pairs, t on log ratios")


def test_two_pairs_that_agree_on_a_large_speedup_are_significant():
    low, high, _, method = ratio_interval([1.1844, 1.2115])  # Llama with Liger's three winners, H200, 2026-12-02
    assert method == "t on log ratios" and low > 1.0
    assert final_verdict(1.198, low, high, method, 2).startswith("faster by 19.8% (95% interval 1.038-1.383x")


def test_six_pairs_or_more_take_the_distribution_free_interval_of_the_median():
    ratios = [1.31, 1.29, 1.33, 1.30, 1.32, 2.90]  # one disturbed pair: it is an end of 6, not of 9
    assert ratio_interval(ratios)[3] == "order statistics" and ratio_interval(ratios)[:2] == (1.29, 2.90)
    assert ratio_interval(ratios + [1.31, 1.30, 1.32])[:2] == (1.30, 1.33)
    assert final_verdict(1.0, 0.97, 1.04, "order statistics", 6) == "no significant change: median ratio 1.000x (95% interval 0.970-1.040x, 6 pairs, includes 1.0)"


def test_the_final_benchmark_takes_at_least_six_pairs_unless_told_otherwise(tmp_path):
    assert MIN_PAIRS == 6
    assert as_first_benchmarked("cpu-mini", tmp_path, None)[1] == 6
    assert as_first_benchmarked("cpu-mini", tmp_path, 2)[1] == 2


SLOW_ROPE = """
import time

import torch


def rotary_embedding(positions, q, k, cos_sin_cache):
    time.sleep(0.2)  # correct, and far too slow for the model: seconds per step where the original takes a tenth
    half = cos_sin_cache.shape[-1] // 2
    rows = cos_sin_cache.index_select(0, positions).to(torch.float32)
    cos, sin = rows[:, None, :half], rows[:, None, half:]
    outputs = []
    for x in (q, k):
        first, second = x.to(torch.float32)[..., :half], x.to(torch.float32)[..., half:]
        outputs.append(torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1).to(x.dtype))
    return outputs[0], outputs[1]
"""


@pytest.mark.slow
def test_a_patch_that_makes_the_model_badly_slow_is_found_by_bisection_and_left_out(tmp_path):
    slow = tmp_path / "slow_rope.py"
    slow.write_text(SLOW_ROPE)
    applied = apply_solutions([(TASK, GOOD), ("llama-3-1-8b-instruct__rope", slow)], tmp_path)
    assert [a.applied for a in applied] == [True, True], [a.reason for a in applied]  # correct, so the check keeps it
    result = benchmark_final(get_workload("cpu-mini"), 3, tmp_path, warmup=1)  # cpu-mini is Llama: it calls the rope point
    assert [e["task_id"] for e in result.excluded] == ["llama-3-1-8b-instruct__rope"]
    assert "bisection found this patch" in result.excluded[0]["reason"]
    assert result.patches == [{"task_id": TASK, "solution": str(GOOD)}] and result.improvement > 0.5
    assert result.model_reward is None and "no grading" in result.reward_note  # none was graded here
    assert status() is None


def test_the_model_rewards_kernel_score_is_the_newest_grading_of_the_patched_file_not_its_best(tmp_path):
    """A file graded twice (the loop's grading, then the pipeline's fresh regrade): the best of the two
    overstates it, so the reward takes the newest."""
    import os

    from apex_core.grader.result import GradeResult
    from apex_core.grader.solution_file import file_hash
    from apex_core.patcher.final import _Patch, integrated_kernel_score

    data = json.loads((Path(__file__).resolve().parents[1] / "pipeline" / "data" / "cpu-mini__rms_norm.grade.json").read_text())
    result = GradeResult.model_validate(data[0] if isinstance(data, list) else data)
    solution = tmp_path / "solution.py"
    solution.write_text("def rms_norm(x, weight, eps):\n    return x\n")
    provenance = result.provenance.model_copy(update={"solution_hash": file_hash(solution)})
    lucky = result.model_copy(update={"provenance": provenance, "score": result.score.model_copy(update={"normalized": 0.9})})
    fresh = result.model_copy(update={"provenance": provenance, "score": result.score.model_copy(update={"normalized": 0.6})})
    (tmp_path / "results" / "output").mkdir(parents=True)
    older, newer = tmp_path / "results" / "output" / "iteration1.json", tmp_path / "results" / "regrade.json"
    older.write_text(lucky.model_dump_json())
    newer.write_text(fresh.model_dump_json())
    os.utime(older, ns=(1_000_000_000, 1_000_000_000))
    patch = _Patch(task_id=result.task_id, solution=str(solution))
    score, note = integrated_kernel_score([patch], tmp_path / "results")
    assert score == pytest.approx(0.6) and "mean normalized kernel score of 1 patch" in note
