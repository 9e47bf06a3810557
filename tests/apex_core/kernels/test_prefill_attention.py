import math

import pytest
import torch

from apex_core.kernels import prefill_attention as prefill
from apex_core.tasks import get_task

SMALL = {"num_heads": 6, "num_kv_heads": 2, "head_dim": 8}


def _naive_prefill(q, k, v, cu_seqlens, scale, sinks=None, window=0):
    """Query by query in float64: causal within each packed prompt, head h on KV head h // G."""
    tokens, num_heads, head_dim = q.shape
    group = num_heads // k.shape[1]
    out = torch.zeros(tokens, num_heads, head_dim, dtype=torch.float64)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        for i in range(start, end):
            first = max(start, i - window + 1) if window else start
            for h in range(num_heads):
                keys, values = k[first : i + 1, h // group].double(), v[first : i + 1, h // group].double()
                logits = scale * (keys @ q[i, h].double())
                top = logits.max()
                weights = torch.exp(logits - top)
                denominator = weights.sum() + (math.exp(float(sinks[h]) - top) if sinks is not None else 0.0)
                out[i, h] = weights @ values / denominator
    return out


def test_the_reference_matches_a_float64_loop_and_never_attends_across_prompts():
    q, k, v, cu, max_len, scale = prefill.make_inputs_torch({"seqs": 3, "seq_len": 9}, "float32", 1, "cpu", SMALL)
    assert cu[-1] == q.shape[0] and max_len == 9
    got = prefill.reference_torch(q, k, v, cu, max_len, scale)
    torch.testing.assert_close(got.double(), _naive_prefill(q, k, v, cu, scale), atol=1e-5, rtol=1e-5)


def test_sinks_and_the_sliding_window_match_the_float64_loop():
    params = {**SMALL, "sliding_window": 4, "attention_sinks": True}
    q, k, v, cu, max_len, scale, sinks, window = prefill.make_inputs_torch({"seqs": 2, "seq_len": 11}, "float32", 2, "cpu", params)
    got = prefill.reference_torch(q, k, v, cu, max_len, scale, sinks, window)
    torch.testing.assert_close(got.double(), _naive_prefill(q, k, v, cu, scale, sinks, window), atol=1e-5, rtol=1e-5)


def test_the_first_token_of_every_prompt_copies_its_own_value():
    q, k, v, cu, max_len, scale = prefill.make_inputs_torch({"seqs": 3, "seq_len": 5}, "float32", 3, "cpu", SMALL)
    out = prefill.reference_torch(q, k, v, cu, max_len, scale)
    for start in cu[:-1].tolist():
        torch.testing.assert_close(out[start], v[start].repeat_interleave(3, dim=0))


def test_computing_the_reference_in_chunks_changes_nothing(monkeypatch):
    args = prefill.make_inputs_torch({"seqs": 2, "seq_len": 40}, "float32", 4, "cpu", {**SMALL, "sliding_window": 7, "attention_sinks": True})
    whole = prefill.reference_torch(*args)
    monkeypatch.setattr(prefill, "_REFERENCE_CHUNK", 3)
    torch.testing.assert_close(prefill.reference_torch(*args), whole)


@pytest.mark.parametrize(("length", "window"), [(1, 0), (10, 0), (10, 4), (3, 4), (128, 128), (300, 128)])
def test_visible_pairs_counts_what_the_mask_lets_through(length, window):
    i, j = torch.meshgrid(torch.arange(length), torch.arange(length), indexing="ij")
    mask = (j <= i) & ((i - j < window) if window else True)
    assert prefill.visible_pairs(length, window) == int(mask.sum())


def test_the_roofline_counts_causal_flops_and_each_tensor_once():
    task = get_task("llama-3-1-8b-instruct__prefill_attention")
    model = prefill.roofline({"seqs": 1, "seq_len": 16384}, "bfloat16", task.params)
    assert model.flops == 4 * (16384 * 16385 // 2) * 32 * 128
    assert model.bytes_moved == (2 * 16384 * 32 + 2 * 16384 * 8) * 128 * 2 + 8
    windowed = prefill.roofline({"seqs": 1, "seq_len": 16384}, "bfloat16", get_task("gpt-oss-20b__prefill_attention").params)
    assert windowed.flops == 4 * (128 * 129 // 2 + (16384 - 128) * 128) * 64 * 64


def test_inputs_are_reproducible_and_prompt_lengths_are_fixed_by_the_shape():
    task = get_task("gpt-oss-20b__prefill_attention")
    first = prefill.make_inputs_torch({"seqs": 4, "seq_len": 100}, "bfloat16", 1, "cpu", task.params)
    again = prefill.make_inputs_torch({"seqs": 4, "seq_len": 100}, "bfloat16", 1, "cpu", task.params)
    other = prefill.make_inputs_torch({"seqs": 4, "seq_len": 100}, "bfloat16", 2, "cpu", task.params)
    assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(first, again))
    assert torch.equal(first[3], other[3]) and not torch.equal(first[0], other[0])
    lengths = torch.diff(first[3]).tolist()
    assert lengths[0] == 100 and all(75 <= n <= 100 for n in lengths) and first[4] == 100
    assert first[0].shape == (sum(lengths), 64, 64) and first[1].shape == (sum(lengths), 8, 64)
    assert first[3].dtype == torch.int32 and first[6].dtype == torch.float32 and first[7] == 128
