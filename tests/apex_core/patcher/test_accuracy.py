"""The accuracy gate on cpu-mini, in this environment's real transformers, with real confined
children and the real grader: a near-miss RMSNorm that the grader passes fails the gate and is
found by bisection among two patches and rolled back alone; the canned solution passes through
``apex patch check`` and stays applied; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.patcher import restore, status
from apex_core.patcher.accuracy import ACCURACY_FILE, AccuracyReport, accuracy_gate
from apex_core.patcher.accuracy_compare import BUDGETS
from apex_core.patcher.apply import apply_solutions
from apex_core.workloads import get_workload

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[3]
TASK = "cpu-mini__rms_norm"
ROPE_TASK = "llama-3-1-8b-instruct__rope"
GOOD = REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py"

EPS_OUTSIDE_THE_ROOT = """
import numpy as np


def rms_norm(x, weight, eps):
    # One pass for the mean square (accumulated in float64, as the baseline does), then a divide.
    x32 = np.asarray(x, dtype=np.float32)
    rms = np.sqrt(np.einsum("ij,ij->i", x32, x32, dtype=np.float64) / x32.shape[-1]).astype(np.float32)
    return x32 / (rms[:, None] + np.float32(eps)) * weight
"""

TORCH_ROPE = """
import torch


def rotary_embedding(positions, q, k, cos_sin_cache):
    half = cos_sin_cache.shape[-1] // 2
    rows = cos_sin_cache.index_select(0, positions).to(torch.float32)
    cos, sin = rows[:, None, :half], rows[:, None, half:]
    outputs = []
    for x in (q, k):
        first, second = x.to(torch.float32)[..., :half], x.to(torch.float32)[..., half:]
        outputs.append(torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1).to(x.dtype))
    return outputs[0], outputs[1]
"""


@pytest.fixture(autouse=True)
def _nothing_stays_patched():
    yield
    restore()  # a failed assertion must not leave the environment patched for the tests after it


def test_a_near_miss_the_grader_passes_fails_the_gate_and_bisection_rolls_back_only_it(tmp_path):
    """The near miss: eps added to the root mean square instead of under the square root,
    ``x / (sqrt(mean(x^2)) + eps)``, the LayerNorm habit of ``std + eps`` that agents (and people)
    carry over to RMSNorm. The grader draws standard-normal rows, whose mean square is about 1: there
    eps = 1e-6 moves the result by about 5e-7 wherever it sits, under the task's 1e-5 tolerance, so
    the grading is ok and correct, and the in-model check (the same inputs) passes it too. Inside
    cpu-mini the hidden states start as embeddings of standard deviation 0.02, mean square 4e-4:
    there eps is 0.25% of the mean square, every norm is off by about 0.12%, and after the layers and
    the final norm the logits are off by about 1.3e-3 relative, 13 times the float32 threshold and
    2,000 times what the canned solution moves them. Nothing in the greedy tokens shows it (its
    logits keep their order): the gate sees it in the logits.

    A correct Torch RoPE is applied beside it, so the failing pair must be bisected: RoPE alone
    passes, the near miss is rolled back, RoPE stays."""
    from apex_core.grader import GradeOptions, Outcome, grade
    from apex_core.tasks import get_task

    near_miss, rope = tmp_path / "near_miss.py", tmp_path / "rope.py"
    near_miss.write_text(EPS_OUTSIDE_THE_ROOT)
    rope.write_text(TORCH_ROPE)
    graded = grade(get_task(TASK), near_miss, GradeOptions(timing=False))
    assert graded.outcome is Outcome.ok and graded.correct, graded.model_dump(include={"outcome", "reason"})
    applied = apply_solutions([(ROPE_TASK, rope), (TASK, near_miss)], tmp_path)
    assert [a.applied for a in applied] == [True, True], [a.reason for a in applied]

    report = accuracy_gate(get_workload("cpu-mini"), tmp_path)

    assert not report.passed and report.confined and report.thresholds.dtype == "float32"
    assert [[p.task_id for p in t.patches] for t in report.trials] == [[ROPE_TASK, TASK], [ROPE_TASK]]
    both, rope_alone = report.trials
    assert not both.passed and both.reason.startswith("logits off by") and "prompt" in both.reason
    assert both.comparison.logits.relative > 10 * BUDGETS["float32"]
    assert both.comparison.tokens.flip is None  # the error never reorders cpu-mini's logits: only the logits show it
    assert rope_alone.passed and rope_alone.comparison.logits.relative < BUDGETS["float32"] / 100
    assert [c.task_id for c in report.culprits] == [TASK] and report.culprits[0].solution == str(near_miss)
    assert report.culprits[0].reason.startswith(f"with {ROPE_TASK}, {TASK}: logits off by")
    assert [p.task_id for p in report.kept] == [ROPE_TASK]
    journal = status()
    assert [(p.task_id, p.state) for p in journal.active()] == [(ROPE_TASK, "applied")]
    stored = AccuracyReport.model_validate_json((Path(report.results_dir) / ACCURACY_FILE).read_text())
    assert stored.culprits == report.culprits and stored.kept == report.kept


def test_the_canned_solution_passes_apex_patch_check_and_stays_applied(tmp_path, apex_cli):
    (applied,) = apply_solutions([(TASK, GOOD)], tmp_path)
    assert applied.applied, applied.reason
    done = apex_cli("patch", "check", "--workload", "cpu-mini", "--results-dir", str(tmp_path), "--prompts", "3",
                    "--tokens", "6", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["passed"] and report["culprits"] == [] and [p["task_id"] for p in report["kept"]] == [TASK]
    (only,) = report["trials"]
    logits, tokens = only["comparison"]["logits"], only["comparison"]["tokens"]
    assert logits["relative"] < BUDGETS["float32"] / 100 and logits["positions"] == 3 * (16 + 6)
    assert tokens == {"sequences": 3, "compared": 3 * 7, "agreed": 3 * 7, "near_ties": 0, "flip": None}
    assert report["verdict"].startswith("passed: logits within float32's thresholds")
    journal = status()
    assert [(p.task_id, p.state, p.solution) for p in journal.active()] == [(TASK, "applied", str(GOOD))]


def test_bad_input_is_one_line(tmp_path, apex_cli):
    private = {"APEX_PATCH_STATE_DIR": str(tmp_path / "state")}  # an environment state of its own: nothing patched
    cases = {
        ("--workload", "cpu-mini"): "nothing is patched in this environment: apply solutions first",
        ("--workload", "cpu-mnii"): "cpu-mini",
        ("--workload", "cpu-mini", "--prompts", "0"): "--prompts 0: give 1 to 64 prompts",
        ("--workload", "cpu-mini", "--tokens", "100000"): "--tokens 100000: give 1 to 512 greedy tokens",
    }
    for arguments, said in cases.items():
        done = apex_cli("patch", "check", *arguments, "--results-dir", str(tmp_path), env=private)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("apex: error: ") and said in lines[0], \
            (arguments, done.stderr)
