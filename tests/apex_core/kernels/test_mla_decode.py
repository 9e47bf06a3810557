import math

import torch

from apex_core.kernels import mla_decode as mla
from apex_core.kernels.paged_decode_attention.paged_cache import context_lengths
from apex_core.tasks import get_task

TASK = "deepseek-r1__mla_decode"


def test_the_absorbed_form_equals_attention_with_per_head_keys_and_values():
    """Expanding the latent into per-head keys and values (the naive MLA) gives the same output."""
    torch.manual_seed(0)
    heads, rank, rope, nope, v_dim, tokens = 4, 32, 8, 16, 16, 11
    c_kv, k_pe = torch.randn(tokens, rank, dtype=torch.float64), torch.randn(tokens, rope, dtype=torch.float64)
    w_uk, w_uv = torch.randn(heads, nope, rank, dtype=torch.float64) / 4, torch.randn(heads, v_dim, rank, dtype=torch.float64) / 4
    q_nope, q_pe = torch.randn(heads, nope, dtype=torch.float64), torch.randn(heads, rope, dtype=torch.float64)
    scale = (nope + rope) ** -0.5

    naive = torch.stack([
        torch.softmax(scale * ((c_kv @ w_uk[h].T) @ q_nope[h] + k_pe @ q_pe[h]), dim=0) @ (c_kv @ w_uv[h].T)
        for h in range(heads)
    ])

    q_absorbed = torch.cat([torch.einsum("hn,hnr->hr", q_nope, w_uk), q_pe], dim=-1)[None]  # (1, heads, rank + rope)
    kv_cache = torch.cat([c_kv, k_pe], dim=-1).view(1, tokens, rank + rope)  # one block of 11 slots
    latent_out = mla.reference_torch(q_absorbed, kv_cache, torch.zeros(1, 1, dtype=torch.int32), torch.tensor([tokens]), scale, rank)
    absorbed = torch.einsum("hr,hvr->hv", latent_out[0], w_uv)
    torch.testing.assert_close(absorbed, naive, atol=1e-5, rtol=1e-5)


def test_the_reference_matches_a_float64_loop_over_pages():
    params = {"num_heads": 4, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
              "rope_factor": 40.0, "mscale_all_dim": 1.0, "block_size": 4}
    q, kv, tables, lens, scale, rank = mla.make_inputs_torch({"batch": 3, "context": 10}, "float32", 1, "cpu", params)
    got = mla.reference_torch(q, kv, tables, lens, scale, rank)
    for b, n in enumerate(lens.tolist()):
        rows = torch.stack([kv[int(tables[b, t // 4]), t % 4].double() for t in range(n)])
        expected = torch.softmax(scale * q[b].double() @ rows.T, dim=-1) @ rows[:, :rank]
        torch.testing.assert_close(got[b].double(), expected, atol=1e-5, rtol=1e-5)


def test_the_softmax_scale_is_deepseeks_with_the_yarn_factor():
    scale = mla.softmax_scale(get_task(TASK).params)
    assert math.isclose(scale, 192**-0.5 * (1 + 0.1 * math.log(40)) ** 2) and 0.135 < scale < 0.1353


def test_inputs_are_reproducible_and_shaped_like_deepseek_r1():
    task = get_task(TASK)
    first = mla.make_inputs_torch({"batch": 2, "context": 70}, "bfloat16", 1, "cpu", task.params)
    again = mla.make_inputs_torch({"batch": 2, "context": 70}, "bfloat16", 1, "cpu", task.params)
    other = mla.make_inputs_torch({"batch": 2, "context": 70}, "bfloat16", 2, "cpu", task.params)
    assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0]) and torch.equal(first[3], other[3])
    q, kv, tables, lens, scale, rank = first
    assert q.shape == (2, 128, 576) and kv.shape[1:] == (64, 576) and tables.shape == (2, 2) and rank == 512
    assert lens.tolist() == context_lengths(2, 70)


def test_the_roofline_counts_the_latent_once_and_both_products_for_every_head():
    task = get_task(TASK)
    lengths = context_lengths(32, 8192)
    model = mla.roofline({"batch": 32, "context": 8192}, "bfloat16", task.params)
    assert model.flops == 2 * sum(lengths) * 128 * (576 + 512)
    table_entries = sum(math.ceil(n / 64) for n in lengths)
    assert model.bytes_moved == (sum(lengths) * 576 + 32 * 128 * (576 + 512)) * 2 + 4 * (table_entries + 32)


def test_one_input_set_of_the_largest_benchmark_shape_stays_near_a_gigabyte():
    task = get_task(TASK)
    bytes_moved = max(mla.roofline(s, task.dtype, task.params).bytes_moved for s in task.benchmark_shapes)
    assert bytes_moved * 9 / 8 < 1.1e9 and task.timing_input_sets == 2


def test_a_long_context_still_gives_outputs_far_above_the_tolerance():
    task = get_task(TASK)
    args = mla.make_inputs_torch({"batch": 1, "context": 4096}, "bfloat16", 3, "cpu", task.params)
    assert mla.reference_torch(*args).abs().max() > 10 * task.tolerance.atol
