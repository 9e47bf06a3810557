"""mla_prefill_attention: DeepSeek-R1/V3's and Kimi K2's prefill attention once the latent is
decompressed (192-wide queries and keys, 128-wide values, one KV head per query head, the softmax
scaled by YaRN's mscale squared)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from apex_core.grader.compare import compare_all
from apex_core.kernels import mla_decode
from apex_core.kernels.prefill_attention import mla, visible_pairs
from apex_core.kernels.prefill_attention import reference_torch as family_reference
from apex_core.tasks import get_task

TASKS = ("deepseek-r1__mla_prefill_attention", "kimi-k2-thinking__mla_prefill_attention")
SMALL = {"qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6,
         "rope_scaling": "yarn (factor 40, original 4096, beta_fast 32, beta_slow 1)", "mscale_all_dim": 1.0}


def test_the_reference_is_attention_computed_token_by_token_in_float64():
    q, k, v, cu, max_len, scale = mla.make_inputs_torch({"seqs": 3, "seq_len": 9, "heads": 3}, "float32", 1, "cpu", SMALL)
    assert q.shape[1:] == (3, 12) and k.shape == q.shape and v.shape[1:] == (3, 6) and max_len == 9
    expected = torch.zeros(v.shape, dtype=torch.float64)
    bounds = cu.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        for i in range(start, end):
            for h in range(3):
                logits = scale * (k[start : i + 1, h].double() @ q[i, h].double())
                expected[i, h] = torch.softmax(logits, dim=0) @ v[start : i + 1, h].double()
    got = mla.reference_torch(q, k, v, cu, max_len, scale)
    assert got.shape == v.shape
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_the_family_reference_takes_the_value_head_dim_from_v():
    """One loop for both: values as wide as the keys give the GQA tasks' output shape (their values
    are checked against float64 in test_prefill_attention.py), narrower ones the same attention over
    fewer columns."""
    q, k, v = torch.randn(20, 4, 8), torch.randn(20, 2, 8), torch.randn(20, 2, 8)
    cu = torch.tensor([0, 12, 20], dtype=torch.int32)
    out = family_reference(q, k, v, cu, 12, 0.3)
    narrow = family_reference(q, k, v[..., :5], cu, 12, 0.3)
    assert out.shape == q.shape and narrow.shape == (20, 4, 5)
    torch.testing.assert_close(narrow, out[..., :5])


@pytest.mark.parametrize(("task_id", "heads", "factor", "decode_task"), [
    (TASKS[0], 128, 40.0, "deepseek-r1__mla_decode"), (TASKS[1], 64, 64.0, "kimi-k2-thinking__mla_decode"),
])
def test_the_tasks_take_their_models_heads_dims_and_yarn_scaled_softmax(task_id, heads, factor, decode_task):
    task = get_task(task_id)
    params = task.params
    assert {s["heads"] for s in task.test_shapes + task.hidden_shapes + task.benchmark_shapes} == {heads}
    assert (params["qk_nope_head_dim"], params["qk_rope_head_dim"], params["v_head_dim"]) == (128, 64, 128)
    assert mla.yarn_factor(params["rope_scaling"]) == factor and params["mscale_all_dim"] == 1.0
    scale = mla.softmax_scale(params)
    assert math.isclose(scale, 192**-0.5 * (0.1 * math.log(factor) + 1) ** 2)
    decode = get_task(decode_task)
    assert decode.params["num_heads"] == heads and math.isclose(scale, mla_decode.softmax_scale(decode.params))
    assert f"about {scale:.4f}" in task.contract


def test_deepseek_v3_is_served_by_r1s_task_and_a_model_without_yarn_has_no_mscale():
    assert get_task(TASKS[0]).also_models == ("deepseek-v3",)
    assert mla.yarn_factor("none") is None and mla.yarn_factor("llama3 (factor 8, original 8192)") is None
    assert mla.softmax_scale({**SMALL, "rope_scaling": "none"}) == 12**-0.5


def test_inputs_are_reproducible_and_shaped_like_deepseek_r1():
    task = get_task(TASKS[0])
    shape = {"seqs": 2, "seq_len": 10, "heads": 128}
    first = mla.make_inputs_torch(shape, "bfloat16", 1, "cpu", task.params)
    again = mla.make_inputs_torch(shape, "bfloat16", 1, "cpu", task.params)
    other = mla.make_inputs_torch(shape, "bfloat16", 2, "cpu", task.params)
    assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0]) and torch.equal(first[3], other[3])
    q, k, v, cu, max_len, scale = first
    tokens = int(cu[-1])
    assert q.shape == k.shape == (tokens, 128, 192) and v.shape == (tokens, 128, 128) and q.dtype == torch.bfloat16
    assert cu.dtype == torch.int32 and max_len == 10 and scale == mla.softmax_scale(task.params)
    assert torch.equal(k[:, :, 128:], k[:, :1, 128:].expand(-1, 128, -1))  # one rope key per token
    assert not torch.equal(k[:, 0, :128], k[:, 1, :128])


def test_the_logits_spread_one_to_two_and_a_half_deviations_under_the_models_scale():
    args = mla.make_inputs_torch({"seqs": 1, "seq_len": 512, "heads": 8}, "float32", 3, "cpu", get_task(TASKS[0]).params)
    q, k, scale = args[0], args[1], args[5]
    spread = (scale * torch.einsum("thd,shd->hts", q, k)).std(dim=(1, 2))
    assert bool(((spread > 0.9) & (spread < 2.7)).all()), spread


def _plain_scale(q, k, v, cu, max_len, scale):
    """head_dim 192's scale without YaRN's mscale."""
    return mla.reference_torch(q, k, v, cu, max_len, q.shape[-1] ** -0.5)


def _no_rope(q, k, v, cu, max_len, scale):
    """q · k over the 128 nope columns only."""
    return mla.reference_torch(q[..., :128].contiguous(), k[..., :128].contiguous(), v, cu, max_len, scale)


def _not_causal(q, k, v, cu, max_len, scale):
    """Every token of a prompt attends to the whole prompt."""
    out = torch.empty(v.shape, dtype=q.dtype)
    bounds = cu.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        probs = torch.softmax(scale * torch.einsum("qhd,khd->hqk", q[start:end].float(), k[start:end].float()), dim=-1)
        out[start:end] = torch.einsum("hqk,khd->qhd", probs, v[start:end].float()).to(q.dtype)
    return out


def _mixes_prompts(q, k, v, cu, max_len, scale):
    """The packed prompts attended as one long causal prompt."""
    whole = torch.tensor([0, int(cu[-1])], dtype=torch.int32)
    return mla.reference_torch(q, k, v, whole, int(cu[-1]), scale)


@pytest.mark.parametrize("task_id", TASKS)
@pytest.mark.parametrize("mistake", [_plain_scale, _no_rope, _not_causal, _mixes_prompts])
def test_the_tasks_inputs_and_tolerance_catch_each_mistake(task_id, mistake):
    task = get_task(task_id)
    shapes = [s for s in task.cpu_shapes if mistake is not _mixes_prompts or s["seqs"] > 1]
    assert shapes, "a shape of several prompts, or mixing them goes unseen"
    for seed, shape in enumerate(shapes, start=1):
        args = mla.make_inputs_torch(shape, "bfloat16", seed, "cpu", task.params)
        expected = mla.reference_torch(*args)
        assert compare_all([expected], [expected], task).passed
        assert not compare_all([mistake(*args)], [expected], task).passed


def _flash_rounding(q, k, v, cu, max_len, scale):
    """The output as a flash-attention kernel rounds it: logits in fp32 with the scale folded into
    exp2, unnormalized probabilities stored in bf16 before P·V, the division at the end."""
    out = torch.empty(v.shape, dtype=q.dtype)
    bounds = cu.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        n = end - start
        logits = torch.einsum("qhd,khd->hqk", q[start:end].float(), k[start:end].float()) * (scale * 1.4426950408889634)
        logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        p = torch.exp2(logits - logits.amax(dim=-1, keepdim=True))
        attended = torch.einsum("hqk,khd->qhd", p.to(torch.bfloat16).float(), v[start:end].float())
        out[start:end] = (attended / p.sum(dim=-1).permute(1, 0)[..., None]).to(q.dtype)
    return out


@pytest.mark.parametrize("task_id", TASKS)
def test_a_kernel_that_rounds_as_flash_attention_does_passes_on_long_prompts(task_id):
    task = get_task(task_id)
    args = mla.make_inputs_torch({"seqs": 2, "seq_len": 1024, "heads": 8}, "bfloat16", 4, "cpu", task.params)
    assert compare_all([_flash_rounding(*args)], [mla.reference_torch(*args)], task).passed


def test_a_long_prompt_still_gives_outputs_far_above_the_tolerance():
    task = get_task(TASKS[0])
    args = mla.make_inputs_torch({"seqs": 1, "seq_len": 2048, "heads": 8}, "bfloat16", 5, "cpu", task.params)
    assert mla.reference_torch(*args).float().abs().max() > 10 * task.tolerance.atol


def test_the_roofline_counts_both_products_at_their_widths_and_each_tensor_once():
    task = get_task(TASKS[0])
    model = mla.roofline(task.benchmark_shapes[-1], "bfloat16", task.params)
    assert model.flops == 2 * (16384 * 16385 // 2) * 128 * (192 + 128)
    assert model.bytes_moved == 16384 * 128 * (192 + 192 + 128 + 128) * 2 + 8
    packed = mla.roofline({"seqs": 3, "seq_len": 129, "heads": 64}, "bfloat16", get_task(TASKS[1]).params)
    lengths = mla.sequence_lengths({"seqs": 3, "seq_len": 129})
    assert packed.flops == 2 * sum(visible_pairs(n) for n in lengths) * 64 * 320
    assert packed.bytes_moved == sum(lengths) * 64 * 640 * 2 + 4 * 4


def test_one_input_set_of_the_largest_shape_stays_under_three_gigabytes():
    task = get_task(TASKS[0])
    largest = max(mla.roofline(s, task.dtype, task.params).bytes_moved for s in task.test_shapes + task.benchmark_shapes)
    assert largest < 3e9 and task.timing_input_sets == 4


_EVERY_TILE = """
import importlib.util, json, sys
from apex_core.grader.call_check import check_call
from apex_core.kernels import interpreter_fixes
from apex_core.tasks import get_task
from apex_core.tasks.reference_solutions import reference_solution_path
interpreter_fixes.apply()
verdicts = []
for task_id in sys.argv[1:]:
    task = get_task(task_id)
    spec = importlib.util.spec_from_file_location("solution", reference_solution_path(task))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    picked = module._config(16384)
    # The tile it picks for long prompts, forced at prompts of 200 and 129 tokens: several query
    # blocks, key blocks below the diagonal (the unmasked phase) and prompt ends inside a tile;
    # then the short prompts' tile at prompts long enough to leave the diagonal too.
    for config, shape in ((picked, {"seqs": 2, "seq_len": 200, "heads": 2}), (picked, {"seqs": 3, "seq_len": 129, "heads": 2}),
                          (module._config(64), {"seqs": 2, "seq_len": 150, "heads": 2})):
        module._config = lambda max_seqlen, config=config: config
        verdicts.append([config[0], check_call(task, module.mla_prefill_attention, shape, 5, "cpu").passed])
print(json.dumps(verdicts))
"""


def test_our_solution_is_correct_with_every_tile_it_picks_under_the_interpreter():
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _EVERY_TILE, TASKS[0]], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[128, True], [128, True], [64, True]]


def test_identify_counts_the_tasks_under_the_prefill_attention_kind():
    from apex_core.identify.task_map import kind_of_task_kernel, matching_tasks

    assert kind_of_task_kernel("mla_prefill_attention") == "prefill_attention"
    assert matching_tasks("prefill_attention", "deepseek-v3", "bfloat16") == [TASKS[0]]
    assert matching_tasks("prefill_attention", "kimi-k2-thinking", "bfloat16") == [TASKS[1]]
