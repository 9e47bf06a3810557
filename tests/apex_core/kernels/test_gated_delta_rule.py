import torch

from apex_core.kernels import gated_delta_rule as gdr
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

SMALL = {"head_dim_k": 16, "head_dim_v": 8}  # unequal dims catch a transposed state


def _small_inputs(seqlen: int = 20, seed: int = 0, dtype: str = "float32") -> tuple:
    shape = {"batch": 2, "seqlen": seqlen, "key_heads": 2, "value_heads": 4}
    return gdr.make_inputs_torch(shape, dtype, seed, "cpu", SMALL)


def _householder_form_float64(q, k, v, g, beta, initial_state):
    """The same rule written as S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, per head, in float64."""
    batch, seqlen, key_heads, d_k = q.shape
    value_heads = v.shape[2]
    out = torch.zeros(batch, seqlen, value_heads, v.shape[3], dtype=torch.float64)
    final = torch.zeros(initial_state.shape, dtype=torch.float64)
    eye = torch.eye(d_k, dtype=torch.float64)
    for b in range(batch):
        for h in range(value_heads):
            kh = h // (value_heads // key_heads)
            state = initial_state[b, h].double()
            for t in range(seqlen):
                k_t, v_t, q_t = k[b, t, kh].double(), v[b, t, h].double(), q[b, t, kh].double()
                a, s = torch.exp(g[b, t, h].double()), beta[b, t, h].double()
                state = a * (eye - s * torch.outer(k_t, k_t)) @ state + s * torch.outer(k_t, v_t)
                out[b, t, h] = state.T @ q_t / d_k**0.5
            final[b, h] = state
    return out, final


def test_the_reference_matches_the_householder_form_in_float64():
    args = _small_inputs()
    o, state = gdr.reference_torch(*args)
    expected_o, expected_state = _householder_form_float64(*args)
    assert o.dtype == torch.float32 and state.dtype == torch.float32 and state.shape == (2, 4, 16, 8)
    torch.testing.assert_close(o.double(), expected_o, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(state.double(), expected_state, atol=1e-6, rtol=1e-5)


def _chunked_float64(q, k, v, g, beta, initial_state, chunk: int = 8):
    """The WY/UT-transform chunked form the fast kernels use, in float64 (one value head group at a time)."""
    group = v.shape[2] // q.shape[2]
    q, k = (x.double().repeat_interleave(group, dim=2).transpose(1, 2) for x in (q, k))
    v, g, beta = v.double().transpose(1, 2), g.double().transpose(1, 2), beta.double().transpose(1, 2)
    state = initial_state.double().clone()
    out = torch.zeros_like(v)
    for start in range(0, q.shape[2], chunk):
        span = slice(start, start + chunk)
        qc, kc, vc, bc = q[:, :, span], k[:, :, span], v[:, :, span], beta[:, :, span]
        cum = torch.cumsum(g[:, :, span], dim=-1)
        n = qc.shape[2]
        gap = cum[..., :, None] - cum[..., None, :]
        lower = torch.tril(torch.ones(n, n, dtype=torch.bool), -1)
        causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
        a = torch.where(lower, bc[..., :, None] * torch.exp(gap.masked_fill(~lower, 0)) * (kc @ kc.transpose(-1, -2)), 0.0)
        t = torch.linalg.inv(torch.eye(n, dtype=torch.float64) + a)
        w = t @ (kc * (bc * torch.exp(cum))[..., None])
        pseudo = t @ (vc * bc[..., None]) - w @ state
        scores = torch.where(causal, (qc @ kc.transpose(-1, -2)) * torch.exp(gap.masked_fill(~causal, 0)), 0.0)
        out[:, :, span] = ((qc * torch.exp(cum)[..., None]) @ state + scores @ pseudo) / q.shape[-1] ** 0.5
        last = cum[..., -1:]
        state = state * torch.exp(last)[..., None] + (kc * torch.exp(last - cum)[..., None]).transpose(-1, -2) @ pseudo
    return out.transpose(1, 2), state


def test_the_chunked_form_the_fast_kernels_use_reproduces_the_recurrence():
    args = _small_inputs(seqlen=21)  # two full chunks of 8 and a partial one
    o, state = gdr.reference_torch(*args)
    chunked_o, chunked_state = _chunked_float64(*args)
    torch.testing.assert_close(chunked_o, o.double(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked_state, state.double(), atol=1e-5, rtol=1e-5)


def test_each_group_of_value_heads_reads_its_own_key_head():
    q, k, v, g, beta, h0 = _small_inputs()
    base, _ = gdr.reference_torch(q, k, v, g, beta, h0)
    k2 = k.clone()
    k2[:, :, 1] = k2[:, :, 1].flip(-1)  # change key head 1 only
    changed, _ = gdr.reference_torch(q, k2, v, g, beta, h0)
    assert torch.equal(changed[:, :, :2], base[:, :, :2]) and not torch.equal(changed[:, :, 2:], base[:, :, 2:])


def test_without_decay_or_writes_the_state_is_only_read():
    q, k, v, g, beta, h0 = _small_inputs(seqlen=5)
    o, state = gdr.reference_torch(q, k, v, torch.zeros_like(g), torch.zeros_like(beta), h0)
    torch.testing.assert_close(state, h0)
    expected = torch.einsum("bthk,bhkv->bthv", q.repeat_interleave(2, dim=2), h0) / 4.0
    torch.testing.assert_close(o, expected, atol=1e-6, rtol=1e-5)


def test_a_full_write_from_an_empty_state_stores_the_value_under_its_key():
    q, k, v, g, beta, h0 = _small_inputs(seqlen=1)
    o, state = gdr.reference_torch(q, k, v, g, torch.ones_like(beta), torch.zeros_like(h0))
    k_v = k.repeat_interleave(2, dim=2)[:, 0]
    torch.testing.assert_close(state, k_v[..., :, None] * v[:, 0, :, None, :])
    # Reading with the written key returns the value (keys are unit vectors).
    recalled = torch.einsum("bhk,bhkv->bhv", k_v, state)
    torch.testing.assert_close(recalled, v[:, 0], atol=1e-5, rtol=1e-4)


def test_inputs_are_reproducible_and_shaped_like_the_layer():
    shape = {"batch": 1, "seqlen": 3, "key_heads": 16, "value_heads": 48}
    params = get_task("qwen3-5-27b__gated_delta_rule").params
    first = gdr.make_inputs_torch(shape, "bfloat16", 4, "cpu", params)
    again = gdr.make_inputs_torch(shape, "bfloat16", 4, "cpu", params)
    other = gdr.make_inputs_torch(shape, "bfloat16", 5, "cpu", params)
    assert all(torch.equal(a, b) for a, b in zip(first, again)) and not torch.equal(first[0], other[0])
    q, k, v, g, beta, h0 = first
    assert q.shape == k.shape == (1, 3, 16, 128) and v.shape == (1, 3, 48, 128) and h0.shape == (1, 48, 128, 128)
    assert (q.dtype, g.dtype, beta.dtype, h0.dtype) == (torch.bfloat16, torch.float32, torch.bfloat16, torch.float32)
    norms = k.float().norm(dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-2)
    assert (g < 0).all() and ((beta > 0) & (beta < 1)).all()


def test_outputs_carry_signal_far_above_the_tolerances_at_the_shortest_hidden_shape():
    task = get_task("qwen3-5-27b__gated_delta_rule")
    shape = {"batch": 1, "seqlen": 3, "key_heads": 16, "value_heads": 48}
    o, state = gdr.reference_torch(*gdr.make_inputs_torch(shape, task.dtype, 0, "cpu", task.params))
    assert o.abs().max() > 10 * task.tolerance_for("bfloat16").atol
    assert state.abs().max() > 10 * task.tolerance_for("float32").atol


def test_the_roofline_moves_inputs_outputs_and_both_states_once():
    params = {"head_dim_k": 128, "head_dim_v": 128}
    shape = {"batch": 1, "seqlen": 16384, "key_heads": 16, "value_heads": 48}
    model = gdr.roofline(shape, "bfloat16", params)
    two = dtype_bytes("bfloat16")
    expected = 2 * 16384 * 16 * 128 * two + 2 * 16384 * 48 * 128 * two + 16384 * 48 * (4 + two) + 2 * 48 * 128 * 128 * 4
    assert model.bytes_moved == expected
    assert model.flops == 6 * 16384 * 48 * 128 * 128
