"""Kernels map to our task ids by kind, model and dtype, through the public catalogue."""

import pytest

from apex_core.errors import ApexUserError
from apex_core.identify.task_map import kind_of_task_kernel, matching_tasks, normalize_dtype


def test_llamas_bf16_rms_norm_is_its_triton_task_first():
    tasks = matching_tasks("rms_norm", "llama-3-1-8b-instruct", "bfloat16", prefer_language="triton")
    assert tasks[0] == "llama-3-1-8b-instruct__rms_norm"


def test_the_cpu_minis_float32_rms_norm_is_its_python_task():
    assert matching_tasks("rms_norm", "cpu-mini", "float32", prefer_language="python") == ["cpu-mini__rms_norm"]


def test_a_dtype_without_a_task_and_the_kind_other_match_nothing():
    assert matching_tasks("rms_norm", "llama-3-1-8b-instruct", "float16") == []
    assert matching_tasks("other", "llama-3-1-8b-instruct", "bfloat16") == []


def test_fp8_kinds_match_whatever_the_workloads_dtype():
    assert "llama-3-1-8b-instruct__gemm_fp8" in matching_tasks("gemm_fp8", "llama-3-1-8b-instruct", "bfloat16")


def test_a_bf16_models_router_is_its_float32_router_task():
    assert matching_tasks("moe_router", "qwen3-5-35b-a3b", "bfloat16") == ["qwen3-5-35b-a3b__moe_router"]


def test_deepseeks_and_kimis_prefill_attention_is_their_mla_prefill_task():
    assert matching_tasks("prefill_attention", "deepseek-r1", "bfloat16") == ["deepseek-r1__mla_prefill_attention"]
    assert matching_tasks("prefill_attention", "deepseek-v3", "bfloat16") == ["deepseek-r1__mla_prefill_attention"]
    assert matching_tasks("prefill_attention", "kimi-k2-thinking", "bfloat16") == ["kimi-k2-thinking__mla_prefill_attention"]


def test_task_kernel_names_with_language_suffixes_and_variants_map_to_kinds():
    assert kind_of_task_kernel("rms_norm_hip") == "rms_norm"
    assert kind_of_task_kernel("per_token_group_quant_fp8") == "fp8_quant"
    assert kind_of_task_kernel("softmax") is None


def test_every_tasks_kernel_is_a_kind_the_identifier_can_name_so_each_task_can_be_found():
    from apex_core.tasks import all_tasks

    assert {t.id: kind_of_task_kernel(t.kernel) for t in all_tasks().values() if kind_of_task_kernel(t.kernel) is None} == {}
    assert matching_tasks("gelu_tanh_and_mul", "gemma-2-9b-it", "bfloat16") == ["gemma-2-9b-it__gelu_tanh_and_mul"]


def test_dtypes_are_normalized_and_unknown_ones_are_one_line_errors():
    assert normalize_dtype("bf16") == normalize_dtype("torch.bfloat16") == "bfloat16"
    with pytest.raises(ApexUserError, match="unknown dtype 'int3'") as error:
        normalize_dtype("int3")
    assert "\n" not in str(error.value)
