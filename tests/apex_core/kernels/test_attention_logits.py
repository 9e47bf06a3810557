"""Gemma 2's soft-capped attention logits: the scale, the cap and the trailing arguments the GQA
attention tasks pass, and inputs under which a kernel that leaves the cap out fails by far."""

import math

import pytest
import torch

from apex_core.kernels import paged_decode_attention, prefill_attention
from apex_core.kernels.attention_logits import attention_scale, optional_arguments
from apex_core.tasks import get_task

GEMMA_TASKS = ("gemma-2-9b-it__prefill_attention", "gemma-2-27b-it__prefill_attention",
               "gemma-2-9b-it__paged_decode_attention", "gemma-2-27b-it__paged_decode_attention")


def test_the_scale_is_query_pre_attn_scalars_where_the_model_states_one():
    assert attention_scale({"head_dim": 128}) == 128 ** -0.5
    assert attention_scale({"head_dim": 128, "query_pre_attn_scalar": 144}) == pytest.approx(1 / 12)
    assert get_task("gemma-2-27b-it__prefill_attention").params["query_pre_attn_scalar"] == 144


def test_the_trailing_arguments_are_none_sinks_and_window_or_all_three_under_a_cap():
    generator = torch.Generator().manual_seed(0)
    assert optional_arguments({}, 4, generator, "cpu") == []
    sinks, window = optional_arguments({"attention_sinks": True, "sliding_window": 128}, 4, generator, "cpu")
    assert sinks.shape == (4,) and window == 128
    assert optional_arguments({"softcap": 50.0, "sliding_window": None}, 4, generator, "cpu") == [None, 0, 50.0]


@pytest.mark.parametrize("task_id", GEMMA_TASKS)
def test_gemma_inputs_make_the_cap_decide_the_output(task_id):
    task = get_task(task_id)
    family = prefill_attention if task.kernel == "prefill_attention" else paged_decode_attention
    args = family.make_inputs_torch(task.cpu_shapes[0], "bfloat16", 3, "cpu", task.params)
    assert args[-1] == 50.0 and args[-2] == 0 and args[-3] is None
    assert args[-4] == pytest.approx(task.params["query_pre_attn_scalar"] ** -0.5)
    capped = family.reference_torch(*args).float()
    uncapped = family.reference_torch(*args[:-1]).float()
    assert (capped - uncapped).abs().max() > 20 * (task.tolerance.atol + task.tolerance.rtol)


def test_the_reference_caps_each_scaled_logit_with_tanh():
    q = torch.tensor([[[1.0, 0.0]], [[3.0, 0.0]]])  # two tokens of one prompt, one head, head_dim 2
    k = torch.tensor([[[2.0, 0.0]], [[1.0, 0.0]]])
    v = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    out = prefill_attention.reference_torch(q, k, v, torch.tensor([0, 2], dtype=torch.int32), 2, 1.0, None, 0, 4.0)
    weights = torch.softmax(torch.tensor([4.0 * math.tanh(6.0 / 4.0), 4.0 * math.tanh(3.0 / 4.0)]), dim=0)
    assert torch.allclose(out[1, 0], weights[0] * v[0, 0] + weights[1] * v[1, 0])
    uncapped = torch.softmax(torch.tensor([6.0, 3.0]), dim=0)
    assert not torch.allclose(out[1, 0], uncapped[0] * v[0, 0] + uncapped[1] * v[1, 0], atol=0.05)
    assert torch.allclose(out[0, 0], v[0, 0])  # token 0 sees itself alone
