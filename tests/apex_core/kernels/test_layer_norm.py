"""The layer_norm family: its reference is PyTorch's LayerNorm, its inputs catch a kernel that drops
the mean, the weight or the bias, its roofline counts its bytes, and the baseline and our solution
are correct under the CPU interpreter (Falcon-7B's width, 4544, is not a power of two)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from apex_core.grader import check_call
from apex_core.kernels import layer_norm
from apex_core.kernels.roofline import dtype_bytes
from apex_core.models import get_model
from apex_core.tasks import get_task

REPO_ROOT = Path(__file__).resolve().parents[3]
FALCON_TASK = "falcon-7b-instruct__layer_norm"
SOLUTION = REPO_ROOT / "reference_solutions" / "layer_norm" / "solution.py"


def _inputs(tokens: int, hidden: int, seed: int = 0) -> tuple:
    return layer_norm.make_inputs_torch({"tokens": tokens, "hidden": hidden}, "bfloat16", seed, "cpu", {"eps": 1e-5})


def test_the_reference_is_pytorchs_layer_norm_in_fp32_rounded_once():
    x, weight, bias, eps = _inputs(7, 4544)
    expected = torch.nn.functional.layer_norm(x.float(), (4544,), weight.float(), bias.float(), eps).to(torch.bfloat16)
    got = layer_norm.reference_torch(x, weight, bias, eps)
    assert got.dtype == torch.bfloat16 and got.shape == x.shape
    # the same fp32 value rounded once: at most one bf16 ulp apart where the fp32 sums round differently
    torch.testing.assert_close(got.float(), expected.float(), atol=1e-2, rtol=2**-7)


def test_the_numpy_reference_agrees():
    x, weight, bias, eps = layer_norm.make_inputs_numpy({"tokens": 5, "hidden": 96}, "float32", 3, "cpu", {"eps": 1e-5})
    got = layer_norm.reference_torch(torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(bias), eps).numpy()
    np.testing.assert_allclose(layer_norm.reference_numpy(x, weight, bias, eps), got, rtol=1e-4, atol=1e-5)


def test_every_row_has_a_mean_far_from_zero_and_weight_and_bias_are_not_trivial():
    x, weight, bias, _ = _inputs(64, 4544, seed=5)
    x32 = x.float()
    ratio = x32.mean(dim=-1).abs() / x32.std(dim=-1)
    assert ratio.min() > 0.4, ratio.min()  # ROW_MEAN_RANGE starts at 0.5 (the channel offsets blur it a little)
    assert (weight.float() - 1).abs().mean() > 0.1 and bias.float().abs().mean() > 0.1


def _without_mean(x, weight, bias, eps):
    """An RMSNorm with a bias: what a kernel that skips the mean computes."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float() + bias.float()).to(x.dtype)


def _without_bias(x, weight, bias, eps):
    return layer_norm.reference_torch(x, weight, torch.zeros_like(bias), eps)


def _without_weight(x, weight, bias, eps):
    return layer_norm.reference_torch(x, torch.ones_like(weight), bias, eps)


def _in_bf16(x, weight, bias, eps):
    """The centred row rounded to bf16 before the scale: the kind of shortcut the tolerance admits."""
    x32 = x.float()
    centred = (x32 - x32.mean(-1, keepdim=True)).to(torch.bfloat16).float()
    inv_std = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
    return ((centred * inv_std).to(torch.bfloat16).float() * weight.float() + bias.float()).to(x.dtype)


@pytest.mark.parametrize("tokens", [1, 3])
@pytest.mark.parametrize("wrong", [_without_mean, _without_bias, _without_weight])
def test_a_kernel_that_skips_the_mean_the_bias_or_the_weight_fails_even_on_one_token(wrong, tokens):
    task = get_task(FALCON_TASK)
    shape = {"tokens": tokens, "hidden": 4544}
    assert check_call(task, layer_norm.reference_torch, shape, seed=tokens).passed
    assert not check_call(task, wrong, shape, seed=tokens).passed


def test_rounding_the_normalized_row_to_bf16_once_more_is_within_tolerance():
    assert check_call(get_task(FALCON_TASK), _in_bf16, {"tokens": 16, "hidden": 4544}, seed=2).passed


def test_the_roofline_reads_x_weight_and_bias_and_writes_y():
    model = layer_norm.roofline({"tokens": 8192, "hidden": 4544}, "bfloat16", {"eps": 1e-5})
    assert model.bytes_moved == (2 * 8192 * 4544 + 2 * 4544) * dtype_bytes("bfloat16")
    assert model.flops == layer_norm.FLOPS_PER_ELEMENT * 8192 * 4544


def test_the_falcon_task_takes_its_width_and_epsilon_from_the_catalog():
    task, falcon = get_task(FALCON_TASK), get_model("falcon-7b-instruct")
    assert falcon.norm == "layer" and falcon.extra["parallel_attn"] is True
    assert task.params["eps"] == falcon.rms_norm_eps == 1e-5  # the registry's field for layer_norm_epsilon
    assert {s["hidden"] for s in [*task.test_shapes, *task.hidden_shapes, *task.benchmark_shapes]} == {4544}
    assert any(s["hidden"] == 4544 for s in task.cpu_shapes) and task.strided_args == (0,)
    largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
    assert layer_norm.roofline(largest, task.dtype, task.params).bytes_moved < 1e9


_INTERPRETED = """
import json, sys
from pathlib import Path
from apex_core.tasks import get_task
from apex_core.suite.interpreter_check import load_entry_point
from apex_core.grader import check_call
task = get_task(sys.argv[1])
report = {}
# (the cpu_shapes, baseline and solution, are tests/apex_core/suite/test_interpreter_check.py's)
# every launch the solution's rule can take, forced at a narrow width: several rows a program (the
# last one partly empty), the weight and bias loaded before and after the reductions, the row split
# into head and tail or held in one padded block
solution = load_entry_point(task, Path(sys.argv[2]))
module = sys.modules[solution.__module__]
report["solution_rows"] = []
for late in (False, True):
    for padded in (False, True):
        module._tile = lambda n_rows, width: (4, 4, late, padded)
        report["solution_rows"] += [check_call(task, solution, {"tokens": 9, "hidden": 40}, seed, strided=strided).passed
                                    for seed, strided in ((1, False), (2, True))]
print(json.dumps(report))
"""


def test_our_solutions_many_row_launch_is_correct_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _INTERPRETED, FALCON_TASK, str(SOLUTION)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["solution_rows"] == [True] * 8
