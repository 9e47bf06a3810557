"""identify ranks a profile's kernels, filters them before or after the top-k, and maps them to tasks."""

from types import SimpleNamespace

import pytest
import torch

from apex_core.errors import ApexUserError
from apex_core.identify import identify, record_calls, recording_sites

LLAMA = "llama-3-1-8b-instruct"
PROFILE = [
    {"name": "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "total_time_us": 600.0, "module": "Linear"},
    {"name": "_rms_norm_forward_kernel", "total_time_us": 200.0},
    {"name": "_swiglu_forward_kernel", "total_time_us": 100.0},
    {"name": "aten::mul", "total_time_us": 60.0, "module": "LlamaMLP"},
    {"name": "_triton_rope", "total_time_us": 40.0},
]


def test_kernels_are_ranked_by_device_time_with_their_share(stack_index):
    found = identify(PROFILE, LLAMA, "bf16", index=stack_index, top_k=None)
    assert [k.rank for k in found] == [1, 2, 3, 4, 5]
    assert [k.name for k in found][:2] == ["nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "_rms_norm_forward_kernel"]
    assert found[0].device_time_share == pytest.approx(0.6)
    assert found[1].task_id == "llama-3-1-8b-instruct__rms_norm"


def test_rows_may_be_any_objects_with_the_fields_and_their_share_is_kept(stack_index):
    record = SimpleNamespace(name="_triton_rope", mangled_name=None, device="cuda:0", calls=4, total_time_us=5.0, share=0.25, module=None, input_shapes=[])
    (found,) = identify([record], LLAMA, "bfloat16", index=stack_index)
    assert (found.kind, found.device_time_share, found.calls) == ("rope", 0.25, 4)


def test_filters_before_the_top_k_give_k_kernels_of_the_wanted_type(stack_index):
    found = identify(PROFILE, LLAMA, "bf16", index=stack_index, top_k=2, kernel_types=["triton"], filter_stage="before")
    assert [k.name for k in found] == ["_rms_norm_forward_kernel", "_swiglu_forward_kernel"]


def test_filters_after_the_top_k_keep_the_wanted_ones_among_the_k_hottest(stack_index):
    found = identify(PROFILE, LLAMA, "bf16", index=stack_index, top_k=2, kernel_types=["triton"], filter_stage="after")
    assert [k.name for k in found] == ["_rms_norm_forward_kernel"]


def test_a_kind_filter_selects_by_kernel_family(stack_index):
    found = identify(PROFILE, LLAMA, "bf16", index=stack_index, kinds=["silu_and_mul"])
    assert [k.name for k in found] == ["_swiglu_forward_kernel", "aten::mul"]


class CpuMiniRMSNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_the_cpu_minis_rms_norm_module_is_patchable_as_its_task_with_recorded_shapes():
    from apex_core.sources import SourceIndex

    model = torch.nn.Sequential(torch.nn.Linear(16, 16), CpuMiniRMSNorm())
    profile = [{"name": "aten::mul", "device": "cpu", "total_time_us": 30.0, "module": "CpuMiniRMSNorm"}, {"name": "aten::addmm", "device": "cpu", "total_time_us": 70.0, "module": "Linear"}]
    first = identify(profile, "cpu-mini", "float32", index=SourceIndex([]))
    assert first[1].patchable is None and "not known without recording the model" in first[1].patchable_reason
    with record_calls(model) as recording:
        model(torch.randn(4, 16))
    norm = identify(profile, "cpu-mini", "float32", index=SourceIndex([]), recording=recording)[1]
    assert (norm.kind, norm.patchable, norm.task_id) == ("rms_norm", True, "cpu-mini__rms_norm")
    assert norm.source == f"{__file__}:{CpuMiniRMSNorm.forward.__code__.co_firstlineno}"
    assert norm.shapes_from == "recorded" and norm.shapes[0].args[0].tensor.shape == [4, 16]
    assert [s.target for s in recording_sites([norm])] == ["CpuMiniRMSNorm"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel_types": ["tritn"]}, "unknown kernel type 'tritn': did you mean 'triton'"),
        ({"kinds": ["rmsnorm"]}, "unknown kernel kind 'rmsnorm'"),
        ({"top_k": 0}, "--top-k must be at least 1"),
        ({"filter_stage": "during"}, "before' or 'after"),
        ({"dtype": "int4"}, "unknown dtype 'int4'"),
        ({"model": "llama-9"}, "unknown model 'llama-9'"),
    ],
)
def test_bad_options_are_one_line_errors(stack_index, kwargs, message):
    arguments = {"model": LLAMA, "dtype": "bf16", **kwargs}
    with pytest.raises(ApexUserError) as error:
        identify(PROFILE, arguments.pop("model"), arguments.pop("dtype"), index=stack_index, **arguments)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_empty_profile_or_a_malformed_row_is_a_one_line_error(stack_index):
    with pytest.raises(ApexUserError, match="the profile has no kernels"):
        identify([], LLAMA, "bf16", index=stack_index)
    with pytest.raises(ApexUserError, match="profile row 1: total_time_us"):
        identify([PROFILE[0], {"name": "x", "total_time_us": -1}], LLAMA, "bf16", index=stack_index)


def test_a_compiled_cuda_kernel_with_indexed_cpp_source_is_still_an_aten_kernel_not_a_triton_one(tmp_path):
    from apex_core.sources import PackageSource, build_index

    root = tmp_path / "site-packages" / "torch"
    (root / "include").mkdir(parents=True)
    (root / "include" / "Loops.cuh").write_text(
        "namespace at { namespace native {\ntemplate <int vec_size, typename func_t>\n"
        "__global__ void vectorized_elementwise_kernel(int N, func_t f) {}\n} }\n")
    index = build_index([PackageSource(name="torch", version="test", root=root)], cache_dir=tmp_path / "cache")
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int, at::native::FillFunctor<float>)"
    assert index.find_kernel(name) is not None  # the index knows the C++ kernel ...
    row = identify([{"name": name, "total_time_us": 5.0}], "cpu-mini", "float32", index=index)[0]
    assert (row.kernel_type, row.source, row.patchable) == ("aten", None, False)  # ... the identifier asks for Triton only
