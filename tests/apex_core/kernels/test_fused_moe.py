import importlib.util

import torch

from apex_core.kernels import fused_moe
from apex_core.tasks import get_task

GPT_OSS = {"top_k": 4, "expert_parallel": 1}
DEEPSEEK = {"top_k": 8, "expert_parallel": 16}


def _inputs(shape, params, seed=1):
    return fused_moe.make_inputs_torch(shape, "bfloat16", seed, "cpu", params)


def test_the_reference_is_each_routed_row_times_its_expert_in_float64_and_zero_for_other_ranks():
    x, w, ids = _inputs({"tokens": 5, "hidden": 40, "n": 24, "experts": 4}, DEEPSEEK)
    out = fused_moe.reference_torch(x, w, ids)
    assert out.shape == (5, 8, 24) and out.dtype == torch.bfloat16
    for t in range(5):
        for j in range(8):
            e = int(ids[t, j])
            if e < 0:
                assert torch.count_nonzero(out[t, j]) == 0
            else:
                exact = w[e].double() @ x[t].double()
                torch.testing.assert_close(out[t, j].double(), exact, rtol=2**-8, atol=1e-6)


def test_gpt_oss_routing_picks_top_k_distinct_experts_for_every_token():
    ids = fused_moe.routed_ids(512, 32, 4, 1, torch.Generator().manual_seed(0))
    assert ids.dtype == torch.int32 and ids.shape == (512, 4)
    assert ids.min() >= 0 and ids.max() < 32
    assert all(len(set(row)) == 4 for row in ids.tolist())
    loads = torch.bincount(ids.flatten().long(), minlength=32)
    assert loads.min() > 0 and loads.max() < 4 * loads.float().mean()  # uneven, but every expert is used


def test_an_expert_parallel_rank_sees_local_ids_or_minus_one_and_every_token_has_a_local_expert():
    ids = fused_moe.routed_ids(2048, 16, 8, 16, torch.Generator().manual_seed(0))
    assert ((ids == -1) | ((ids >= 0) & (ids < 16))).all()
    assert ((ids >= 0).sum(dim=1) >= 1).all()
    local_share = (ids >= 0).float().mean().item()
    assert 0.11 < local_share < 0.16  # about 1.1 of 8 slots: 0.5 on average plus the forced one


def test_inputs_are_reproducible_and_scaled_so_outputs_are_order_one():
    shape = {"tokens": 7, "hidden": 256, "n": 32, "experts": 8}
    first, again, other = _inputs(shape, GPT_OSS, 3), _inputs(shape, GPT_OSS, 3), _inputs(shape, GPT_OSS, 4)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])
    out = fused_moe.reference_torch(*first).float()
    assert 0.5 < out.std().item() < 2.0


def test_the_roofline_counts_only_what_every_batch_must_move():
    shape = {"tokens": 4, "hidden": 2880, "n": 5760, "experts": 32}
    gpt = fused_moe.roofline(shape, "bfloat16", GPT_OSS)
    assert gpt.bytes_moved == (4 * 2880 + 4 * 5760 * 2880 + 4 * 4 * 5760) * 2 + 4 * 4 * 4
    assert gpt.flops == 2 * 16 * 5760 * 2880
    shape = {"tokens": 4, "hidden": 7168, "n": 4096, "experts": 16}
    deepseek = fused_moe.roofline(shape, "bfloat16", DEEPSEEK)
    assert deepseek.bytes_moved == (4 * 7168 + 4096 * 7168 + 4 * 8 * 4096) * 2 + 4 * 8 * 4
    assert deepseek.flops == 2 * 4 * 4096 * 7168


def test_the_baseline_align_step_gives_each_row_one_slot_in_a_block_of_its_own_expert():
    task = get_task("deepseek-r1__fused_moe")
    spec = importlib.util.spec_from_file_location("fused_moe_baseline", task.baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    ids = fused_moe.routed_ids(50, 4, 8, 16, torch.Generator().manual_seed(2))
    sorted_rows, block_expert, padded_total = baseline._moe_align_block_size(ids, 4, 16)
    flat = ids.flatten().long()
    rows = sorted_rows[: int(padded_total)].long()
    real = rows[rows < flat.numel()]
    assert sorted(real.tolist()) == list(range(flat.numel()))
    for block, expert in enumerate(block_expert[: int(padded_total) // 16].tolist()):
        members = rows[block * 16 : (block + 1) * 16]
        members = members[members < flat.numel()]
        assert (flat[members] == expert).all()  # -1 blocks hold exactly the rows of other ranks


def test_the_tasks_stage_two_input_sets_of_under_a_gigabyte_and_a_bit():
    for task_id in ("gpt-oss-20b__fused_moe", "deepseek-r1__fused_moe"):
        task = get_task(task_id)
        assert task.timing_input_sets == 2
        largest = max(task.benchmark_shapes, key=lambda s: s["tokens"])
        weight_bytes = largest["experts"] * largest["n"] * largest["hidden"] * 2
        assert weight_bytes < 1.1e9
    assert get_task("gpt-oss-20b__fused_moe").test_shapes[0]["n"] == 2 * get_task("gpt-oss-20b__fused_moe").architecture.moe_intermediate_size
    deepseek = get_task("deepseek-r1__fused_moe")
    assert deepseek.test_shapes[0]["experts"] * deepseek.params["expert_parallel"] == deepseek.architecture.num_experts
