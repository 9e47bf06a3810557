import torch

from apex_core.kernels import reshape_and_cache as cache
from apex_core.tasks import get_task

PARAMS = {"num_kv_heads": 2, "head_dim": 8, "block_size": 4}


def test_the_reference_writes_each_real_token_at_its_slot_and_nothing_else():
    key, value, key_cache, value_cache, slots = cache.make_inputs_torch({"tokens": 24}, "float32", 1, "cpu", PARAMS)
    new_keys, new_values = cache.reference_torch(key, value, key_cache.clone(), value_cache.clone(), slots)
    expected_keys, expected_values = key_cache.clone(), value_cache.clone()
    for i, slot in enumerate(slots.tolist()):  # the loop a reader would write
        if slot >= 0:
            expected_keys[slot // 4, slot % 4] = key[i]
            expected_values[slot // 4, slot % 4] = value[i]
    assert torch.equal(new_keys, expected_keys) and torch.equal(new_values, expected_values)


def test_padding_tokens_are_skipped():
    key, value, key_cache, value_cache, slots = cache.make_inputs_torch({"tokens": 16}, "float32", 2, "cpu", PARAMS)
    assert slots[-2:].tolist() == [cache.PAD_SLOT] * 2 and (slots[:-2] >= 0).all()
    key[-2:] = float("nan")  # a write of a padding row would show
    new_keys, _ = cache.reference_torch(key, value, key_cache.clone(), value_cache.clone(), slots)
    assert not new_keys.isnan().any()


def test_decode_tokens_land_in_distinct_blocks_and_prefill_tokens_fill_blocks_in_order():
    _, _, key_cache, _, decode_slots = cache.make_inputs_torch({"tokens": 64}, "float32", 3, "cpu", PARAMS)
    real = decode_slots[decode_slots >= 0]
    assert len(set((real // 4).tolist())) == len(real) == 56 and int(real.max()) < key_cache.shape[0] * 4
    _, _, key_cache, _, prefill_slots = cache.make_inputs_torch({"tokens": 300}, "float32", 3, "cpu", PARAMS)
    assert (prefill_slots >= 0).all() and len(set(prefill_slots.tolist())) == 300
    assert torch.equal(prefill_slots % 4, torch.arange(300) % 4)
    blocks = (prefill_slots[::4] // 4).tolist()
    assert blocks != sorted(blocks) and key_cache.shape[0] == 75 + 75 // 8 + 1


def test_inputs_are_reproducible_from_the_seed():
    task = get_task("gpt-oss-20b__reshape_and_cache")
    first = cache.make_inputs_torch({"tokens": 5}, "bfloat16", 7, "cpu", task.params)
    again = cache.make_inputs_torch({"tokens": 5}, "bfloat16", 7, "cpu", task.params)
    other = cache.make_inputs_torch({"tokens": 5}, "bfloat16", 8, "cpu", task.params)
    assert all(torch.equal(a, b) for a, b in zip(first, again)) and not torch.equal(first[0], other[0])
    assert first[0].shape == (5, 8, 64) and first[2].shape[1:] == (16, 8, 64) and first[4].dtype == torch.int64


def test_the_roofline_counts_only_the_rows_written_and_the_slots():
    task = get_task("llama-3-1-8b-instruct__reshape_and_cache")
    assert cache.roofline({"tokens": 16384}, "bfloat16", task.params).bytes_moved == 2 * 2 * 16384 * 8 * 128 * 2 + 8 * 16384
    assert cache.roofline({"tokens": 64}, "bfloat16", task.params).bytes_moved == 2 * 2 * 56 * 8 * 128 * 2 + 8 * 64
    assert task.output_args == (2, 3) and task.tolerance.atol == task.tolerance.rtol == 0
