"""MXFP4 GEMMs (GPT-OSS's expert weights) are the gemm_mxfp4 kind, and map to its task whatever the
workload's dtype: the kind's name fixes the format. Kept apart from test_kinds.py, which other
kernel families edit at the same time."""

import pytest

from apex_core.identify.kinds import KERNEL_KINDS, kind_from_name
from apex_core.identify.task_map import DTYPE_CARRIED_BY_KIND, matching_tasks


@pytest.mark.parametrize("name", [
    "_matmul_ogs",  # triton_kernels' MoE matmul, what vLLM and SGLang run GPT-OSS's experts with
    "_p_matmul_ogs",
    "mxfp4_gemm_kernel",
    "_gemm_afp4wfp4_kernel",
    "dequant_mxfp4_to_bf16",
    "dequantize_fp4_kernel",
])
def test_mxfp4_gemm_names_are_the_gemm_mxfp4_kind(name):
    assert kind_from_name(name) == "gemm_mxfp4"


@pytest.mark.parametrize("name", ["dynamic_mxfp4_quant", "_dynamic_mxfp4_quant_kernel", "quant_to_mxfp4"])
def test_quantizing_activations_to_mxfp4_is_not_the_gemm(name):
    assert kind_from_name(name) == "other"


def test_fp8_and_plain_gemms_keep_their_kinds():
    assert kind_from_name("cutlass_scaled_mm") == "gemm_fp8"
    assert kind_from_name("fused_moe_kernel") == "fused_moe"


def test_the_kind_carries_its_dtype_and_maps_both_gpt_oss_models_to_the_one_task():
    assert "gemm_mxfp4" in KERNEL_KINDS and "gemm_mxfp4" in DTYPE_CARRIED_BY_KIND
    for model in ("gpt-oss-20b", "gpt-oss-120b"):
        for dtype in ("bfloat16", "float16"):
            assert matching_tasks("gemm_mxfp4", model, dtype) == ["gpt-oss-20b__gemm_mxfp4"]
    assert matching_tasks("gemm_mxfp4", "llama-3-1-8b-instruct", "bfloat16") == []
