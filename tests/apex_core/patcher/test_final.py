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
from apex_core.patcher.final import FINAL_FILE, benchmark_final, bootstrap_median_interval
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
    result = benchmark_final(get_workload("cpu-mini"), 3, tmp_path, warmup=1)
    assert result.significant and result.interval[0] > 1.0 and result.improvement > 0.5, result.verdict
    assert len(result.ratios) == 3 and result.verdict.startswith("faster by")
    assert status() is None, "the patches are restored after the final benchmark"
    stored = json.loads((Path(result.results_dir) / FINAL_FILE).read_text())
    assert stored["patches"] == [{"task_id": TASK, "solution": str(GOOD)}]


def test_nothing_patched_is_a_one_line_error():
    with pytest.raises(ApexUserError, match="nothing is patched"):
        benchmark_final(get_workload("cpu-mini"), 3, Path("unused"))


def test_the_bootstrap_interval_brackets_the_median_and_excludes_one_only_when_it_should():
    low, high = bootstrap_median_interval([1.30, 1.32, 1.29, 1.31, 1.33])
    assert 1.29 <= low <= 1.31 <= high <= 1.33
    low, high = bootstrap_median_interval([0.97, 1.04, 1.00, 0.99, 1.02])
    assert low < 1.0 < high


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
    assert result.patches == [{"task_id": TASK, "solution": str(GOOD)}] and result.significant and result.improvement > 0.5
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
