import math

import pytest
import torch

from apex_core.kernels import rope
from apex_core.kernels.rope import frequencies
from apex_core.tasks import get_task

ROPE_TASKS = ["llama-3-1-8b-instruct__rope", "qwen3-5-27b__rope", "gpt-oss-20b__rope", "deepseek-r1__rope"]

SMALL = {"num_heads": 3, "num_kv_heads": 1, "head_dim": 16, "rotary_dim": 16, "rope_theta": 10000.0, "max_position": 64}


def _complex_rotation(x: torch.Tensor, angles: torch.Tensor, pairs: str) -> torch.Tensor:
    """Rope as multiplication by e^(i·angle) in float64, pairing dims as the style says."""
    half = angles.shape[-1]
    x64 = x.to(torch.float64)
    rot = x64[..., : 2 * half]
    if pairs == "half":
        z = torch.complex(rot[..., :half], rot[..., half:])
    else:
        z = torch.view_as_complex(rot.reshape(*rot.shape[:-1], half, 2).contiguous())
    z = z * torch.polar(torch.ones_like(angles), angles)[:, None, :]
    out = torch.cat((z.real, z.imag), -1) if pairs == "half" else torch.view_as_real(z).flatten(-2)
    return torch.cat((out, x64[..., 2 * half:]), -1)


@pytest.mark.parametrize(("reference", "pairs"), [(rope.reference_neox, "half"), (rope.reference_gptj, "adjacent")])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_the_references_rotate_each_pair_by_its_angle_like_a_complex_multiplication(reference, pairs, rotary_dim):
    params = {**SMALL, "rotary_dim": rotary_dim}
    positions, q, k, cache = rope.make_inputs_torch({"tokens": 5}, "float32", 0, "cpu", params)
    angles = torch.outer(positions.to(torch.float64), frequencies.inverse_frequencies(params).to(torch.float64))
    q_out, k_out = reference(positions, q, k, cache)
    torch.testing.assert_close(q_out.double(), _complex_rotation(q, angles, pairs), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k_out.double(), _complex_rotation(k, angles, pairs), atol=1e-5, rtol=1e-5)


def test_partial_rotary_copies_the_dims_past_rotary_dim_unchanged():
    task = get_task("qwen3-5-27b__rope")
    positions, q, k, cache = rope.make_inputs_torch({"tokens": 4}, "bfloat16", 1, "cpu", task.params)
    q_out, k_out = rope.reference_neox(positions, q, k, cache)
    assert cache.shape == (262144, 64) and q.shape == (4, 24, 256) and k.shape == (4, 4, 256)
    assert torch.equal(q_out[..., 64:], q[..., 64:]) and torch.equal(k_out[..., 64:], k[..., 64:])
    assert not torch.equal(q_out[..., :64], q[..., :64])


def test_llama3_scaling_keeps_fast_dims_divides_slow_ones_by_8_and_blends_between():
    params = get_task("llama-3-1-8b-instruct__rope").params
    base = 1.0 / (500000.0 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128))
    ratio = (frequencies.inverse_frequencies(params).double() / base).numpy()
    wavelength = (2 * math.pi / base).numpy()
    assert (abs(ratio[wavelength < 8192 / 4] - 1) < 1e-6).all()
    assert (abs(ratio[wavelength > 8192] - 1 / 8) < 1e-6).all()
    between = (wavelength >= 2048) & (wavelength <= 8192)
    assert between.any() and ((ratio[between] > 1 / 8 - 1e-6) & (ratio[between] < 1 + 1e-6)).all()


def _gpt_oss_yarn(head_dim: int, theta: float, factor: float, original: int) -> tuple[float, torch.Tensor]:
    """OpenAI's gpt-oss reference formula, restated in float64: concentration and inverse frequencies."""
    freq = theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    low = head_dim / 2 * math.log(original / (32 * 2 * math.pi)) / math.log(theta)
    high = head_dim / 2 * math.log(original / (1 * 2 * math.pi)) / math.log(theta)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    mask = 1 - ramp
    return 0.1 * math.log(factor) + 1.0, (1 / (factor * freq)) * (1 - mask) + (1 / freq) * mask


def test_gpt_oss_cache_follows_its_reference_yarn_with_the_concentration_on_cos_and_sin():
    params = get_task("gpt-oss-20b__rope").params
    concentration, expected = _gpt_oss_yarn(64, 150000.0, 32.0, 4096)
    torch.testing.assert_close(frequencies.inverse_frequencies(params).double(), expected, rtol=1e-5, atol=0)
    cache = frequencies.cos_sin_cache(params)
    assert cache.shape == (131072, 64) and abs(concentration - 1.3466) < 1e-4
    norms = cache[:, :32] ** 2 + cache[:, 32:] ** 2
    torch.testing.assert_close(norms, torch.full_like(norms, concentration**2), rtol=1e-5, atol=0)


def test_phi_3_5_longrope_divides_each_frequency_by_its_factor_and_scales_cos_and_sin():
    task = get_task("phi-3-5-mini-instruct__rope")
    factors = torch.tensor(task.architecture.extra["rope_long_factor"], dtype=torch.float64)
    expected = 1 / (factors * 10000.0 ** (torch.arange(0, 96, 2, dtype=torch.float64) / 96))
    torch.testing.assert_close(frequencies.inverse_frequencies(task.params).double(), expected, rtol=1e-5, atol=0)
    scale = math.sqrt(1 + math.log(131072 / 4096) / math.log(4096))  # vLLM's Phi3LongRoPE scaling factor
    assert abs(frequencies.attention_factor(task.params) - scale) < 1e-9 and abs(scale - 1.19) < 0.01
    with pytest.raises(ValueError, match="longrope_factors has 2 factors; rotary_dim 96 needs 48"):
        frequencies.inverse_frequencies({**task.params, "longrope_factors": "1.0 2.0"})


def test_deepseek_yarn_rounds_the_correction_range_and_leaves_cos_and_sin_unit():
    params = get_task("deepseek-r1__rope").params
    freq = 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    low = math.floor(64 * math.log(4096 / (32 * 2 * math.pi)) / (2 * math.log(10000.0)))
    high = math.ceil(64 * math.log(4096 / (1 * 2 * math.pi)) / (2 * math.log(10000.0)))
    keep = 1 - ((torch.arange(32, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    expected = (1 / (40 * freq)) * (1 - keep) + (1 / freq) * keep
    torch.testing.assert_close(frequencies.inverse_frequencies(params).double(), expected, rtol=1e-5, atol=0)
    cache = frequencies.cos_sin_cache(params)
    assert cache.shape == (163840, 64)
    norms = cache[:, :32] ** 2 + cache[:, 32:] ** 2
    torch.testing.assert_close(norms, torch.ones_like(norms), rtol=1e-5, atol=0)


def test_decode_positions_are_scattered_and_prefill_positions_consecutive_and_all_distinct():
    params = get_task("llama-3-1-8b-instruct__rope").params
    decode = rope.make_inputs_torch({"tokens": 64}, "bfloat16", 3, "cpu", params)[0]
    prefill = rope.make_inputs_torch({"tokens": 1000}, "bfloat16", 3, "cpu", params)[0]
    assert decode.dtype == torch.int64 and len(set(decode.tolist())) == 64 and decode.max() < 131072
    assert torch.equal(prefill, torch.arange(int(prefill[0]), int(prefill[0]) + 1000))


def test_inputs_are_reproducible_from_the_seed_and_the_shared_cache_is_copied():
    params = get_task("gpt-oss-20b__rope").params
    first = rope.make_inputs_torch({"tokens": 7}, "bfloat16", 5, "cpu", params)
    again = rope.make_inputs_torch({"tokens": 7}, "bfloat16", 5, "cpu", params)
    other = rope.make_inputs_torch({"tokens": 7}, "bfloat16", 6, "cpu", params)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])
    first[3].zero_()  # a solution that scribbles on its input must not poison later inputs
    assert not torch.equal(first[3], rope.make_inputs_torch({"tokens": 7}, "bfloat16", 5, "cpu", params)[3])


def test_every_rope_task_rotates_real_vectors_far_above_its_tolerance():
    for task_id in ROPE_TASKS:
        task = get_task(task_id)
        args = rope.make_inputs_torch({"tokens": 3}, task.dtype, 0, "cpu", task.params)
        q_out, _ = getattr(rope, task.reference.partition(":")[2])(*args)
        assert q_out.abs().max() > 10 * task.tolerance.atol


def test_the_roofline_reads_and_writes_q_and_k_once_plus_one_cache_row_per_token():
    params = get_task("llama-3-1-8b-instruct__rope").params
    model = rope.roofline({"tokens": 16384}, "bfloat16", params)
    assert model.bytes_moved == 2 * 16384 * 40 * 128 * 2 + 16384 * 8 + 16384 * 128 * 4
    assert model.flops == 3 * 16384 * 40 * 128
