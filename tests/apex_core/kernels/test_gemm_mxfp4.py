"""gemm_mxfp4: the MXFP4 decode against hand-worked values, the input generator's layout, the
roofline's packed bytes, and the baseline and our solution under the CPU interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apex_core.kernels.gemm_mxfp4 import make_inputs_torch, reference_torch, roofline
from apex_core.kernels.gemm_mxfp4.mxfp4 import dequantize, quantize, unpack_codes
from apex_core.tasks import get_task

ROOT = Path(__file__).resolve().parents[3]
BASELINE = ROOT / "apex_core/kernels/gemm_mxfp4/baseline_triton.py"
SOLUTION = ROOT / "reference_solutions/gemm_mxfp4/solution.py"

# The OCP MX v1.0 spec's E2M1 table (section 5.3.3): code -> value, sign in bit 3.
E2M1_BY_HAND = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _pack(codes: list[int]) -> torch.Tensor:
    """One row of codes packed low nibble first (code 2j in byte j's low nibble)."""
    return torch.tensor([[codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2)]], dtype=torch.uint8)


def test_every_e2m1_code_decodes_to_the_spec_s_value_at_scale_one():
    codes = list(range(16)) * 2  # 32 codes: one MX block
    w = dequantize(_pack(codes), torch.tensor([[127]], dtype=torch.uint8))
    assert w.tolist() == [E2M1_BY_HAND * 2]
    assert torch.signbit(w[0, 8]) and not torch.signbit(w[0, 0])  # code 8 is -0


@pytest.mark.parametrize(("e8m0", "factor"), [(127, 1.0), (128, 2.0), (126, 0.5), (120, 2.0**-7), (134, 128.0)])
def test_an_e8m0_scale_multiplies_its_block_by_two_to_the_e_minus_127(e8m0, factor):
    codes = [7, 9] + [2] * 30 + [5] * 32  # two blocks: 6, -0.5, then 1s; then 3s
    scales = torch.tensor([[e8m0, 127]], dtype=torch.uint8)
    w = dequantize(_pack(codes), scales)
    assert w[0, :3].tolist() == [6.0 * factor, -0.5 * factor, 1.0 * factor]
    assert w[0, 32:].tolist() == [3.0] * 32  # the second block keeps its own scale


def test_the_low_nibble_holds_the_even_value():
    packed = torch.tensor([[0x71] * 16], dtype=torch.uint8)  # low nibble 1 (0.5), high nibble 7 (6.0)
    assert unpack_codes(packed)[0, :2].tolist() == [1, 7]
    assert dequantize(packed, torch.tensor([[127]], dtype=torch.uint8))[0, :4].tolist() == [0.5, 6.0, 0.5, 6.0]


def test_the_reference_is_x_times_the_hand_decoded_weight():
    codes = [(3 * i) % 16 for i in range(64)]
    scales = torch.tensor([[125, 130]], dtype=torch.uint8)
    by_hand = torch.tensor([E2M1_BY_HAND[c] for c in codes]) * torch.tensor([2.0**-2] * 32 + [2.0**3] * 32)
    x = torch.linspace(-1, 1, 64).to(torch.bfloat16)[None, :]
    y = reference_torch(x, _pack(codes), scales)
    assert y.dtype == torch.bfloat16 and y.shape == (1, 1)
    exact = (x.double() @ by_hand.double()[:, None]).item()
    assert y.item() == pytest.approx(exact, rel=2**-8)


def test_quantize_round_trips_to_the_nearest_representable_value_and_uses_the_spec_s_exponent():
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(8, 64, generator=generator)
    packed, scales = quantize(w)
    assert packed.shape == (8, 32) and scales.shape == (8, 2)
    amax = w.reshape(8, 2, 32).abs().amax(-1)
    assert torch.equal(scales.to(torch.int32) - 127, (torch.floor(torch.log2(amax)) - 2).to(torch.int32))
    back = dequantize(packed, scales)
    step = torch.exp2(scales.to(torch.float32) - 127).repeat_interleave(32, 1)
    # amax / 2^e lies in [4, 8): up to 6 the E2M1 grid's widest step is 2 (error <= 1 step); the
    # block's largest values, past 6, are clamped to 6 (error < 2 steps), as the spec's conversion does.
    assert ((back - w).abs() < 2 * step).all()
    assert ((back - w).abs() <= step)[w.abs() <= 6 * step].all()


def test_inputs_are_reproducible_in_a_realistic_scale_range_and_outputs_are_order_one():
    shape = {"tokens": 4, "k": 2880, "n": 256}
    x, packed, scales = make_inputs_torch(shape, "bfloat16", 3, "cpu", {})
    again = make_inputs_torch(shape, "bfloat16", 3, "cpu", {})
    assert all(torch.equal(a, b) for a, b in zip((x, packed, scales), again))
    assert (x.dtype, packed.dtype, scales.dtype) == (torch.bfloat16, torch.uint8, torch.uint8)
    assert (packed.shape, scales.shape) == ((256, 1440), (256, 90))
    assert 115 <= scales.min().item() and scales.max().item() <= 125  # 2^-12 .. 2^-2 for N(0, 1/2880)
    assert 0.5 < reference_torch(x, packed, scales).float().std().item() < 2.0


def test_the_roofline_counts_4_25_bits_a_weight():
    model = roofline({"tokens": 4, "k": 2880, "n": 5760}, "bfloat16", {})
    assert model.bytes_moved == 2 * 4 * 2880 + 5760 * 1440 + 5760 * 90 + 2 * 4 * 5760
    weight_bytes = model.bytes_moved - 2 * 4 * 2880 - 2 * 4 * 5760
    assert weight_bytes * 8 == 4.25 * 5760 * 2880
    assert model.flops == 2 * 4 * 5760 * 2880


def test_the_task_covers_the_gate_up_projection_of_both_gpt_oss_models():
    task = get_task("gpt-oss-20b__gemm_mxfp4")
    assert tuple(task.also_models) == ("gpt-oss-120b",)
    assert all((s["k"], s["n"]) == (2880, 5760) for s in task.test_shapes + task.benchmark_shapes)
    assert {"tokens": 17, "k": 2880, "n": 2880} in task.hidden_shapes  # the down projection


# --- Triton under the CPU interpreter -------------------------------------------------------------
# Run in a child process: TRITON_INTERPRET must be set before Triton is imported.

_INTERPRETED = r"""
import importlib.util, json, sys
from apex_core.kernels import interpreter_fixes
interpreter_fixes.apply()
import torch
from apex_core.kernels.gemm_mxfp4 import make_inputs_torch, reference_torch
from apex_core.tasks import get_task

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def close(actual, expected):
    return bool(torch.allclose(actual.float(), expected.float(), atol=1e-2, rtol=1.6e-2))

report = {}
shapes = get_task("gpt-oss-20b__gemm_mxfp4").cpu_shapes
for name, path in (("baseline", sys.argv[1]), ("solution", sys.argv[2])):
    module = load(path, name)
    passed = []
    for shape in shapes:
        x, packed, scales = make_inputs_torch(dict(shape), "bfloat16", 5, "cpu", {})
        passed.append(close(module.gemm_mxfp4(x, packed, scales), reference_torch(x, packed, scales)))
    report[name] = passed
    report[name + "_split"] = module._config(3, 96, 1024, 132)[3] if name == "solution" else None

# The model's K (2880 = 90 blocks: 15 steps of 6) split 4 ways unevenly (4, 4, 4, 3 steps), N cut small.
solution = load(sys.argv[2], "full_k")
x, packed, scales = make_inputs_torch({"tokens": 2, "k": 2880, "n": 64}, "bfloat16", 7, "cpu", {})
report["solution_full_k"] = [solution._config(2, 64, 2880, 132), close(solution.gemm_mxfp4(x, packed, scales), reference_torch(x, packed, scales))]

# What the tolerance must catch: the baseline fed swapped nibbles (a kernel reading the high nibble
# first), all scales at 127 (a kernel that ignores them), or one block's scale at 127.
baseline = load(sys.argv[1], "wrong")
x, packed, scales = make_inputs_torch({"tokens": 3, "k": 160, "n": 96}, "bfloat16", 6, "cpu", {})
expected = reference_torch(x, packed, scales)
one_block = scales.clone()
one_block[:, 2] = 127
report["wrong"] = [
    close(baseline.gemm_mxfp4(x, (packed >> 4) | (packed << 4), scales), expected),
    close(baseline.gemm_mxfp4(x, packed, torch.full_like(scales, 127)), expected),
    close(baseline.gemm_mxfp4(x, packed, one_block), expected),
]
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreted() -> dict:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _INTERPRETED, str(BASELINE), str(SOLUTION)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_baseline_and_our_solution_match_the_reference_at_every_cpu_shape(interpreted):
    runs = len(get_task("gpt-oss-20b__gemm_mxfp4").cpu_shapes)
    assert interpreted["baseline"] == [True] * runs and interpreted["solution"] == [True] * runs
    assert interpreted["solution_split"] == 2  # the first cpu shape runs the split-K path


def test_our_solution_is_correct_at_the_model_s_k_split_unevenly(interpreted):
    assert interpreted["solution_full_k"] == [[16, 64, 6, 4, 4, 3], True]


def test_a_kernel_with_the_wrong_nibble_order_or_a_missing_scale_fails(interpreted):
    assert interpreted["wrong"] == [False, False, False]
