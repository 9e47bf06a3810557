import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apex_core.grader.compare import compare_all
from apex_core.kernels import qk_norm
from apex_core.kernels.roofline import dtype_bytes
from apex_core.kernels.seeded import row_strided
from apex_core.tasks import get_task

QWEN_TASKS = ("qwen3-5-27b__qk_norm", "qwen3-5-35b-a3b__qk_norm")
SMALL = {"num_heads": 6, "num_kv_heads": 2, "head_dim": 64, "eps": 1e-6, "zero_centered": True}


def test_the_reference_matches_a_float64_loop_over_each_head():
    q, k, q_weight, k_weight, eps = qk_norm.make_inputs_torch({"tokens": 3}, "bfloat16", 1, "cpu", SMALL)
    got_q, got_k = qk_norm.reference_torch(q, k, q_weight, k_weight, eps)
    assert got_q.shape == (3, 6, 64) and got_k.shape == (3, 2, 64) and got_q.dtype == got_k.dtype == torch.bfloat16
    for x, weight, got in ((q, q_weight, got_q), (k, k_weight, got_k)):
        for token in range(x.shape[0]):
            for head in range(x.shape[1]):
                row = [float(v) for v in x[token, head]]
                inv_rms = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + eps)
                for col, value in enumerate(row):
                    expected = value * inv_rms * (1.0 + float(weight[col]))
                    assert abs(float(got[token, head, col]) - expected) <= 1e-2 + 1.6e-2 * abs(expected)


def _wrong_kernels():
    """Kernels that make the mistakes the tasks must catch."""
    def plain_weight(q, k, qw, kw, eps):  # scales by w, not 1 + w
        return qk_norm.reference_torch(q, k, qw - 1.0, kw - 1.0, eps)

    def whole_row(q, k, qw, kw, eps):  # one rms over all heads of a token
        def norm(x, w):
            x32 = x.float()
            inv_rms = torch.rsqrt(x32.pow(2).mean(dim=(-2, -1), keepdim=True) + eps)
            return (x32 * inv_rms * (1.0 + w.float())).to(x.dtype)
        return norm(q, qw), norm(k, kw)

    def swapped_weights(q, k, qw, kw, eps):
        return qk_norm.reference_torch(q, k, kw, qw, eps)

    def weight_in_bf16(q, k, qw, kw, eps):  # 1 + w rounded to bf16 first: within tolerance
        return qk_norm.reference_torch(q, k, (1.0 + qw) - 1.0, (1.0 + kw) - 1.0, eps)

    return {"plain_weight": (plain_weight, False), "whole_row": (whole_row, False),
            "swapped_weights": (swapped_weights, False), "weight_in_bf16": (weight_in_bf16, True)}


@pytest.mark.parametrize("mistake", list(_wrong_kernels()))
def test_the_tasks_inputs_and_tolerance_catch_a_wrong_norm(mistake):
    task = get_task(QWEN_TASKS[1])
    kernel, passes = _wrong_kernels()[mistake]
    args = qk_norm.make_inputs_torch({"tokens": 5}, task.dtype, 0, "cpu", task.params)
    expected = list(qk_norm.reference_torch(*args))
    assert compare_all(list(kernel(*args)), expected, task).passed is passes


def test_the_reference_reads_row_strided_views_as_the_hidden_shapes_pass_them():
    q, k, q_weight, k_weight, eps = qk_norm.make_inputs_torch({"tokens": 4}, "bfloat16", 2, "cpu", SMALL)
    strided_q, strided_k = row_strided(q), row_strided(k)
    assert strided_q.stride(1) > q.shape[-1]
    for got, want in zip(qk_norm.reference_torch(strided_q, strided_k, q_weight, k_weight, eps),
                         qk_norm.reference_torch(q, k, q_weight, k_weight, eps)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_the_generator_has_only_the_zero_centered_form():
    with pytest.raises(ValueError, match="zero-centered"):
        qk_norm.make_inputs_torch({"tokens": 1}, "bfloat16", 0, "cpu", {**SMALL, "zero_centered": False})


def test_the_qwen_tasks_take_their_models_heads_and_fit_a_timed_input_set_in_a_gigabyte():
    for task_id in QWEN_TASKS:
        task = get_task(task_id)
        model = task.architecture
        assert model.extra["qk_norm"] and model.extra["rms_norm_zero_centered"]
        assert (task.params["num_heads"], task.params["num_kv_heads"], task.params["head_dim"], task.params["eps"]) == (
            model.num_attention_heads, model.num_key_value_heads, model.head_dim, model.rms_norm_eps)
        largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
        assert qk_norm.roofline(largest, task.dtype, task.params).bytes_moved < 1e9
    # Different head counts: two tasks, not one with also_models.
    assert get_task(QWEN_TASKS[0]).behaviour_hash() != get_task(QWEN_TASKS[1]).behaviour_hash()


def test_the_roofline_reads_and_writes_every_head_once_and_both_weights():
    model = qk_norm.roofline({"tokens": 8192}, "bfloat16", {"num_heads": 24, "num_kv_heads": 4, "head_dim": 256})
    elements = 8192 * 28 * 256
    assert model.bytes_moved == (2 * elements + 2 * 256) * dtype_bytes("bfloat16")
    assert model.flops == qk_norm.FLOPS_PER_ELEMENT * elements


_EVERY_TILE = """
import importlib.util, json, sys
from apex_core.grader.call_check import check_call
from apex_core.tasks import get_task
from apex_core.tasks.reference_solutions import reference_solution_path
task = get_task(sys.argv[1])
spec = importlib.util.spec_from_file_location("qk_norm_solution", reference_solution_path(task))
solution = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solution)
verdicts = []
for tile in ((2, 2), (8, 4), (16, 4)):
    solution._tile = lambda rows, tile=tile: tile
    verdicts += [check_call(task, solution.qk_norm, {"tokens": 5}, 3, "cpu", strided).passed for strided in (False, True)]
print(json.dumps(verdicts))
"""


def test_our_solution_is_correct_with_every_tile_it_picks_under_the_interpreter():
    """The CPU shapes are decode-sized and take only the smallest tile; the larger ones (picked for
    serving and prefill sizes) are checked here at a small shape, with partial tiles of q and k."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _EVERY_TILE, QWEN_TASKS[0]], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True] * 6


def test_identify_finds_each_models_task_under_the_qk_norm_kind():
    from apex_core.identify.task_map import kind_of_task_kernel, matching_tasks

    assert kind_of_task_kernel("qk_norm") == "qk_norm"
    for task_id in QWEN_TASKS:
        assert matching_tasks("qk_norm", get_task(task_id).model, "bfloat16") == [task_id]
