import math

import pytest
import torch

from apex_core.kernels import paged_decode_attention as decode
from apex_core.kernels import prefill_attention as prefill
from apex_core.kernels.paged_decode_attention.paged_cache import NULL_BLOCK, build_block_tables, context_lengths, live_blocks
from apex_core.tasks import get_task

LLAMA = "llama-3-1-8b-instruct__paged_decode_attention"
GPT_OSS = "gpt-oss-20b__paged_decode_attention"
SMALL = {"num_heads": 8, "num_kv_heads": 2, "head_dim": 16, "block_size": 4}


def _naive_decode(q, key_cache, value_cache, block_tables, seq_lens, scale, sinks=None, window=0):
    """Token by token in float64, with the GQA mapping written out: head h reads KV head h // G."""
    batch, num_heads, head_dim = q.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.zeros(batch, num_heads, head_dim, dtype=torch.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        first = max(0, n - window) if window else 0
        for h in range(num_heads):
            logits, values = [], []
            for t in range(first, n):
                block = int(block_tables[b, t // block_size])
                key = key_cache[block, t % block_size, h // group].double()
                logits.append(scale * float(q[b, h].double() @ key))
                values.append(value_cache[block, t % block_size, h // group].double())
            top = max(logits + ([float(sinks[h])] if sinks is not None else []))
            weights = [math.exp(s - top) for s in logits]
            denominator = sum(weights) + (math.exp(float(sinks[h]) - top) if sinks is not None else 0.0)
            out[b, h] = sum(w * v for w, v in zip(weights, values)) / denominator
    return out


def test_the_reference_matches_a_float64_loop_over_tokens():
    q, kc, vc, tables, lens, scale = decode.make_inputs_torch({"batch": 2, "context": 11}, "float32", 4, "cpu", SMALL)
    got = decode.reference_torch(q, kc, vc, tables, lens, scale)
    torch.testing.assert_close(got.double(), _naive_decode(q, kc, vc, tables, lens, scale), atol=1e-5, rtol=1e-5)


def test_sinks_and_the_window_match_the_float64_loop():
    params = {**SMALL, "sliding_window": 8, "attention_sinks": True}
    q, kc, vc, tables, lens, scale, sinks, window = decode.make_inputs_torch({"batch": 2, "context": 19}, "float32", 5, "cpu", params)
    got = decode.reference_torch(q, kc, vc, tables, lens, scale, sinks, window)
    expected = _naive_decode(q, kc, vc, tables, lens, scale, sinks, window)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)


def test_a_sink_takes_probability_mass_but_adds_no_value():
    q, kc, vc, tables, lens, scale = decode.make_inputs_torch({"batch": 2, "context": 9}, "float32", 6, "cpu", SMALL)
    plain = decode.reference_torch(q, kc, vc, tables, lens, scale)
    silent = decode.reference_torch(q, kc, vc, tables, lens, scale, torch.full((8,), -1e4), 0)
    dominant = decode.reference_torch(q, kc, vc, tables, lens, scale, torch.full((8,), 1e4), 0)
    torch.testing.assert_close(silent, plain)
    assert dominant.abs().max() == 0


def test_keys_outside_the_window_do_not_matter():
    params = {**SMALL, "sliding_window": 8, "attention_sinks": True}
    args = list(decode.make_inputs_torch({"batch": 2, "context": 40}, "float32", 7, "cpu", params))
    before = decode.reference_torch(*args)
    key_cache, value_cache, tables, lens = args[1], args[2], args[3], args[4]
    for b, n in enumerate(lens.tolist()):
        for t in range(n - 8):  # every position before the window, wherever its block points
            block = int(tables[b, t // 4])
            key_cache[block, t % 4] = 1e3
            value_cache[block, t % 4] = 1e3
    assert torch.equal(decode.reference_torch(*args), before)


def test_decoding_the_last_token_equals_the_last_row_of_prefill():
    """Two independent formulations: the paged decode reference and the packed prefill reference."""
    params = {"num_heads": 8, "num_kv_heads": 2, "head_dim": 16, "sliding_window": 6, "attention_sinks": True}
    q, k, v, cu, max_len, scale, sinks, window = prefill.make_inputs_torch({"seqs": 1, "seq_len": 13}, "float32", 8, "cpu", params)
    full = prefill.reference_torch(q, k, v, cu, max_len, scale, sinks, window)
    block_size = 4
    blocks = math.ceil(13 / block_size)
    pad = blocks * block_size - 13
    key_cache = torch.cat([k, torch.zeros(pad, 2, 16)]).view(blocks, block_size, 2, 16)
    value_cache = torch.cat([v, torch.zeros(pad, 2, 16)]).view(blocks, block_size, 2, 16)
    tables = torch.arange(blocks, dtype=torch.int32)[None]
    last = decode.reference_torch(q[-1:], key_cache, value_cache, tables, torch.tensor([13], dtype=torch.int32), scale, sinks, window)
    torch.testing.assert_close(last[0], full[-1], atol=1e-5, rtol=1e-5)


def test_sequence_lengths_are_near_the_context_and_fixed_by_the_shape():
    lengths = context_lengths(64, 2048)
    assert lengths == context_lengths(64, 2048) and lengths[0] == 2048
    assert all(1536 <= n <= 2048 for n in lengths) and len(set(lengths)) > 32
    assert context_lengths(5, 1) == [1] * 5


def test_block_tables_scatter_live_blocks_and_point_the_rest_at_the_null_block():
    lengths = [40, 17, 33]
    table, num_blocks = build_block_tables(lengths, 16, torch.Generator().manual_seed(0), sliding_window=20)
    live = [(b, j) for b, n in enumerate(lengths) for j in live_blocks(n, 16, 20)]
    ids = [int(table[b, j]) for b, j in live]
    assert NULL_BLOCK not in ids and len(set(ids)) == len(ids) and max(ids) < num_blocks
    assert ids != sorted(ids)  # shuffled, as a free list leaves them
    assert int(table[0, 0]) == NULL_BLOCK  # positions 0-15 of a 40-token sequence are out of a 20-token window
    assert table.shape == (3, 3) and table.dtype == torch.int32


def test_inputs_are_reproducible_and_only_the_block_placement_and_values_change_with_the_seed():
    task = get_task(GPT_OSS)
    first = decode.make_inputs_torch({"batch": 3, "context": 300}, "bfloat16", 1, "cpu", task.params)
    again = decode.make_inputs_torch({"batch": 3, "context": 300}, "bfloat16", 1, "cpu", task.params)
    other = decode.make_inputs_torch({"batch": 3, "context": 300}, "bfloat16", 2, "cpu", task.params)
    assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(first, again))
    assert torch.equal(first[4], other[4]) and not torch.equal(first[0], other[0])
    assert (first[0].dtype, first[3].dtype, first[4].dtype, first[6].dtype) == (torch.bfloat16, torch.int32, torch.int32, torch.float32)
    assert first[5] == 64**-0.5 and first[7] == 128


def test_the_roofline_counts_the_attended_keys_and_values():
    task = get_task(LLAMA)
    lengths = context_lengths(4, 2048)
    model = decode.roofline({"batch": 4, "context": 2048}, "bfloat16", task.params)
    kv_bytes = 2 * sum(lengths) * 8 * 128 * 2
    table_bytes = 4 * (sum(math.ceil(n / 16) for n in lengths) + 4)
    assert model.bytes_moved == kv_bytes + 2 * 4 * 32 * 128 * 2 + table_bytes
    assert model.flops == 4 * sum(lengths) * 32 * 128
    windowed = decode.roofline({"batch": 4, "context": 2048}, "bfloat16", get_task(GPT_OSS).params)
    assert windowed.flops == 4 * 4 * 128 * 64 * 64


@pytest.mark.parametrize("task_id", [LLAMA, "qwen3-5-27b__paged_decode_attention", GPT_OSS])
def test_one_input_set_of_the_largest_benchmark_shape_stays_near_a_gigabyte(task_id):
    task = get_task(task_id)
    largest = max(task.benchmark_shapes, key=lambda s: decode.roofline(s, task.dtype, task.params).bytes_moved)
    assert decode.roofline(largest, task.dtype, task.params).bytes_moved * 9 / 8 < 1.1e9


def test_a_long_context_still_gives_outputs_far_above_the_tolerance():
    task = get_task(LLAMA)
    args = decode.make_inputs_torch({"batch": 1, "context": 8192}, "bfloat16", 3, "cpu", task.params)
    out = decode.reference_torch(*args)
    assert out.abs().max() > 10 * task.tolerance.atol
