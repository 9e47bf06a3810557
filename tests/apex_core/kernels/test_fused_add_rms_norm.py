import torch

from apex_core.kernels import fused_add_rms_norm as fused
from apex_core.kernels.roofline import dtype_bytes
from apex_core.tasks import get_task

SHAPE = {"tokens": 5, "hidden": 96}
TASKS = [
    "llama-3-1-8b-instruct__fused_add_rms_norm",
    "qwen3-5-27b__fused_add_rms_norm",
    "gpt-oss-20b__fused_add_rms_norm",
    "deepseek-r1__fused_add_rms_norm",
]


def _inputs(seed=1, **params):
    return fused.make_inputs_torch(SHAPE, "bfloat16", seed, "cpu", {"eps": 1e-6, **params})


def _float64_norm(rows: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    r = rows.double()
    return r / torch.sqrt((r * r).mean(dim=-1, keepdim=True) + eps) * scale.double()


def test_the_new_residual_is_the_sum_rounded_to_bf16():
    x, residual, w, eps = _inputs()
    _, residual_out = fused.reference_torch(x, residual, w, eps)
    assert residual_out.dtype == torch.bfloat16
    assert torch.equal(residual_out, (x.double() + residual.double()).to(torch.bfloat16))


def test_the_output_is_the_norm_of_the_rounded_sum_in_float64():
    x, residual, w, eps = _inputs()
    out, residual_out = fused.reference_torch(x, residual, w, eps)
    torch.testing.assert_close(out.double(), _float64_norm(residual_out, w, eps), atol=1e-2, rtol=1e-2)


def test_the_zero_centered_variant_scales_by_one_plus_the_weight():
    x, residual, w, eps = _inputs(zero_centered=1.0)
    out, residual_out = fused.reference_torch_zero_centered(x, residual, w, eps)
    torch.testing.assert_close(out.double(), _float64_norm(residual_out, 1.0 + w.double(), eps), atol=1e-2, rtol=1e-2)
    assert abs(w.float().mean().item()) < 0.2  # the stored offset sits around 0


def test_the_reference_returns_a_tuple_and_leaves_its_inputs_alone():
    args = _inputs()
    before = [a.clone() for a in args[:3]]
    result = fused.reference_torch(*args)
    assert isinstance(result, tuple) and len(result) == 2
    assert all(torch.equal(a, b) for a, b in zip(args[:3], before))


def test_inputs_are_reproducible_and_the_residual_stream_has_outlier_channels():
    first, again, other = _inputs(7), _inputs(7), _inputs(8)
    assert all(torch.equal(a, b) for a, b in zip(first[:3], again[:3]))
    assert not torch.equal(first[1], other[1])
    per_channel = first[1].float().abs().mean(dim=0)
    assert (per_channel > 8 * per_channel.median()).sum() == fused.OUTLIER_CHANNELS


def test_the_roofline_reads_two_rows_and_writes_two_per_token():
    model = fused.roofline({"tokens": 8192, "hidden": 7168}, "bfloat16", {})
    assert model.bytes_moved == (4 * 8192 * 7168 + 7168) * dtype_bytes("bfloat16")
    assert model.flops == 5 * 8192 * 7168


def test_only_the_qwen_task_is_zero_centered_as_its_model_config_says():
    for task_id in TASKS:
        task = get_task(task_id)
        zero_centered = bool(task.architecture.extra.get("rms_norm_zero_centered", False))
        assert task.reference.endswith("_zero_centered") == zero_centered == ("zero_centered" in task.baseline)
        assert task.entry_point == "fused_add_rms_norm" and not task.output_args
        assert all(s["hidden"] == task.architecture.hidden_size for s in task.test_shapes + task.hidden_shapes)
