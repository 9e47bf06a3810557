import shutil

import pytest

from apex_core.profiling import names
from apex_core.profiling.names import base_name, demangle, demangle_many, fallback_demangle, is_mangled

# Real kernel symbols, as profilers report them for CUTLASS, cuBLAS and PyTorch's own kernels.
CUTLASS = "_ZN7cutlass7Kernel2I66cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x6_tn_align8EEvNT_6ParamsE"
CUBLAS = (
    "_Z17gemv2T_kernel_valIiiffffLi128ELi16ELi4ELi4ELb0ELb1E18cublasGemvParamsExIi30cublasGemvTensorStridedBatched"
    "IKfES3_S1_IfEfEEvT11_T4_S7_"
)
ATEN = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENSt5arrayIPcLm1EEEEEviT0_T1_"
# Names that are not C++ symbols: a Triton kernel, a Tensile (rocBLAS/hipBLASLt) kernel.
TRITON = "_rms_norm_forward_kernel"
TENSILE = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1_SN_1LDSB1_AFC1_AG0_BL1"

needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not on PATH")


def test_mangled_symbols_are_told_from_plain_names():
    assert is_mangled(CUTLASS) and is_mangled(CUBLAS) and is_mangled("_Z7vecCopyv.kd")
    assert not is_mangled(TRITON) and not is_mangled(TENSILE)


@needs_cxxfilt
def test_cutlass_cublas_and_aten_symbols_demangle_with_cxxfilt():
    assert demangle(CUTLASS).startswith("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16")
    assert demangle(CUBLAS).startswith("void gemv2T_kernel_val<int, int, float, float")
    assert demangle(ATEN).startswith("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>")


@needs_cxxfilt
def test_a_mangled_cutlass_symbol_reduces_to_its_kernel_template():
    assert base_name(CUTLASS) == "cutlass::Kernel2"


def test_plain_names_come_back_unchanged():
    assert demangle(TRITON) == TRITON
    assert demangle_many([TRITON, TENSILE]) == {TRITON: TRITON, TENSILE: TENSILE}


def test_base_name_is_the_qualified_function_without_templates_or_parameters():
    assert base_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
                     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)") == "at::native::vectorized_elementwise_kernel"
    assert base_name("(anonymous namespace)::rope_kernel_bf16_vec(void*, void*, void const*, int)") == "(anonymous namespace)::rope_kernel_bf16_vec"
    assert base_name(TRITON) == TRITON


@pytest.mark.parametrize(
    ("symbol", "readable"),
    [
        ("_Z7vecCopyv", "vecCopy()"),
        ("_Z13divide_kernelPfPKfS1_ii", "divide_kernel(float*, float const*, float const*, int, int)"),
        ("_ZN2at6native3fooEPfS1_RKNS0_3BarE", "at::native::foo(float*, float*, at::native::Bar const&)"),
        ("_ZN12_GLOBAL__N_120rope_kernel_bf16_vecEPvS0_PKvi", "(anonymous namespace)::rope_kernel_bf16_vec(void*, void*, void const*, int)"),
    ],
)
def test_the_fallback_demangles_plain_symbols_as_cxxfilt_does(symbol, readable):
    assert fallback_demangle(symbol) == readable


@pytest.mark.parametrize("symbol", [CUTLASS, CUBLAS, ATEN, "_Z3fooPFviE"])
def test_the_fallback_leaves_templates_and_unknown_grammar_mangled_rather_than_guess(symbol):
    assert fallback_demangle(symbol) is None


@pytest.fixture
def fresh_demangle_cache():
    """Names demangled with c++filt are remembered; a test without it must not see or leave any."""
    names.demangle.cache_clear()
    yield
    names.demangle.cache_clear()


def test_without_cxxfilt_the_fallback_is_used_and_the_rest_stays_mangled(monkeypatch, fresh_demangle_cache):
    monkeypatch.setattr(names.shutil, "which", lambda tool: None)
    assert demangle("_Z7vecCopyv.kd") == "vecCopy()"
    assert demangle(CUTLASS) == CUTLASS
