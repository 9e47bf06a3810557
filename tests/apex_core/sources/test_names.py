"""Profiler names become the names kernels have in source."""

import shutil

import pytest

from apex_core.sources.names import demangle, function_base_name, kernel_name_candidates


def test_a_cpp_signature_gives_its_unqualified_function_name():
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
    assert function_base_name(name) == "vectorized_elementwise_kernel"
    assert function_base_name("_rms_norm_forward_kernel") == "_rms_norm_forward_kernel"


def test_triton_signature_and_variant_suffixes_are_tried_after_the_exact_name():
    assert kernel_name_candidates("_rms_norm_forward_kernel_0d1d2d3de4") == ["_rms_norm_forward_kernel_0d1d2d3de4", "_rms_norm_forward_kernel"]
    assert kernel_name_candidates("fused_moe_kernel_3")[-1] == "fused_moe_kernel"
    assert kernel_name_candidates("chunk_gated_delta_rule_fwd_kernel_h_blockdim64") == ["chunk_gated_delta_rule_fwd_kernel_h_blockdim64"]


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not on PATH")
def test_mangled_names_are_demangled_with_cxxfilt():
    assert demangle("_ZN4vllm15rms_norm_kernelIfEEvPT_PKS1_S4_fii").startswith("void vllm::rms_norm_kernel<float>(")


def test_names_that_are_not_mangled_are_left_alone():
    assert demangle("_triton_rope") == "_triton_rope"
