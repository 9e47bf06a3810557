"""Real kernel names get the right kind, kernel type and patchability, each with its reason."""

import pytest

from apex_core.identify import identify_row, kind_from_module
from apex_core.identify.profile import ProfiledKernel

LLAMA = "llama-3-1-8b-instruct"
CUBLAS_BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
CUTLASS_BF16 = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)"

CASES = [
    # name, module, kind, kernel type, patchable, words of the reason
    ("_rms_norm_forward_kernel", None, "rms_norm", "triton", True, "Triton source in liger_kernel"),
    ("_swiglu_forward_kernel", None, "silu_and_mul", "triton", True, "Triton source in liger_kernel"),
    ("_triton_rope", None, "rope", "triton", True, "Triton source in liger_kernel"),
    ("chunk_gated_delta_rule_fwd_kernel_h_blockdim64", None, "gated_delta_rule", "triton", True, "Triton source in fla"),
    ("recompute_w_u_fwd_kernel", None, "gated_delta_rule", "triton", True, "Triton source in fla"),
    ("chunk_fwd_kernel_o", "Qwen3_5GatedDeltaNet", "gated_delta_rule", "triton", True, "Triton source in fla"),
    ("chunk_fwd_kernel_o", None, "other", "triton", False, "no task family"),
    ("layer_norm_gated_fwd_kernel", None, "other", "triton", False, "no task family"),
    (CUBLAS_BF16, "Linear", "gemm_bf16", "cublas", False, "vendor library"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", None, "gemm_bf16", "cublas", False, "vendor library"),
    (CUTLASS_BF16, None, "gemm_bf16", "cutlass", False, "vendor library"),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB1", None, "gemm_bf16", "hipblaslt", False, "vendor library"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_cublas", None, "gemm_fp8", "cublas", False, "vendor library"),
    # a module's op without the recording run: whether its forward is the model's Python is not known yet
    ("aten::mm", "Linear", "gemm_bf16", "aten", None, "not known without recording the model, which finds Linear.forward"),
    ("aten::mul", "LlamaRMSNorm", "rms_norm", "aten", None, "(apex identify without --no-shapes)"),
    ("aten::mul", "LlamaMLP", "silu_and_mul", "aten", None, "not known without recording"),
    ("aten::cat", "LlamaAttention", "rope", "aten", None, "not known without recording"),
    ("aten::_scaled_dot_product_flash_attention", "LlamaAttention", "prefill_attention", "aten", None, "not known without recording"),
    ("aten::mul", "Qwen3_5RMSNormGated", "other", "aten", False, "libtorch"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)", None, "fused_add_rms_norm", "native", False, "binary extension"),
    # vLLM's one act-and-mul kernel, its activation a template argument: Gemma's GeGLU, Llama's SwiGLU
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::gelu_tanh_kernel<c10::BFloat16>, true>(c10::BFloat16*, "
     "c10::BFloat16 const*, int)", None, "gelu_tanh_and_mul", "native", False, "binary extension"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, "
     "c10::BFloat16 const*, int)", None, "silu_and_mul", "native", False, "binary extension"),
    ("triton_poi_fused_add_mul_0", None, "other", "triton", False, "no indexed source"),
    ("Memcpy HtoD (Pageable -> Device)", None, "other", "other", False, "no source"),
]


@pytest.mark.parametrize(("name", "module", "kind", "ktype", "patchable", "reason"), CASES)
def test_a_real_kernel_name_gets_its_kind_type_and_patchability(stack_index, name, module, kind, ktype, patchable, reason):
    row = ProfiledKernel(name=name, module=module, total_time_us=10.0)
    found = identify_row(row, 0.1, LLAMA, "bfloat16", stack_index, None)
    assert (found.kind, found.kernel_type, found.patchable) == (kind, ktype, patchable)
    assert reason in found.patchable_reason


def test_a_triton_hit_points_at_its_file_line_and_launch_site(stack_index):
    found = identify_row(ProfiledKernel(name="_rms_norm_forward_kernel", total_time_us=1.0), 1.0, LLAMA, "bfloat16", stack_index, None)
    assert found.source is not None and found.source.endswith("liger_kernel/ops/rms_norm.py:4")
    assert found.call_site is not None and found.call_site.target == "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel"


def test_a_float32_gemm_is_no_gemm_task_of_ours():
    row = ProfiledKernel(name="aten::mm", module="Linear", total_time_us=1.0)
    from apex_core.sources import SourceIndex

    assert identify_row(row, 1.0, "cpu-mini", "float32", SourceIndex([]), None).kind == "other"


@pytest.mark.parametrize(
    ("module", "op", "kind"),
    [
        ("LlamaRMSNorm", "aten::pow", "rms_norm"),
        ("Qwen3RMSNorm", "aten::rsqrt", "rms_norm"),
        ("DeepseekV3TopkRouter", "aten::sigmoid", "moe_router"),
        ("GptOssTopKRouter", "aten::topk", "moe_router"),
        ("GptOssTopKRouter", "aten::addmm", "gemm"),
        ("GptOssExperts", "aten::bmm", "fused_moe"),
        ("GptOssExperts", "aten::_grouped_mm", "fused_moe"),
        ("GptOssExperts", "aten::clamp", "swiglu_clamped"),
        ("GptOssExperts", "aten::sigmoid", "swiglu_clamped"),
        ("Qwen3MoeExperts", "aten::mul", "fused_moe"),
        ("Qwen3MoeSparseMoeBlock", "aten::index_add_", "fused_moe"),
        ("Qwen3_5GatedDeltaNet", "aten::_conv_depthwise2d", "causal_conv1d"),
        ("LlamaDecoderLayer", "aten::add", None),
        ("LlamaAttention", "aten::mul", "rope"),
        ("LlamaAttention", "aten::copy_", "other"),  # repeat_kv's expansion of the cache, not the rotary embedding
        ("LlamaAttention", "aten::index_copy_", "other"),  # the static cache's update
        ("GELUTanh", "aten::gelu", "gelu_tanh_and_mul"),  # Gemma 2's GeGLU: the gate's activation ...
        ("Gemma2MLP", "aten::mul", "gelu_tanh_and_mul"),  # ... and its multiply by up
        ("LlamaMLP", "aten::mul", "silu_and_mul"),
        ("GELUActivation", "aten::gelu", None),  # Falcon's exact, ungated GELU: none of our kinds
    ],
)
def test_module_classes_name_the_kind_of_the_ops_run_inside_them(module, op, kind):
    assert kind_from_module(module, op) == kind


@pytest.mark.parametrize(
    ("module", "launch_op", "kind"),
    [
        ("GptOssExperts", "aten::clamp", "swiglu_clamped"),
        ("GptOssExperts", "aten::mul", "swiglu_clamped"),
        ("GptOssExperts", "aten::_grouped_mm", "fused_moe"),
        ("GptOssRMSNorm", "aten::mul", "rms_norm"),
        ("GptOssAttention", "aten::cat", "rope"),
        ("LlamaMLP", "aten::mul", "silu_and_mul"),
    ],
)
def test_a_gpu_kernel_takes_the_op_rules_of_its_module_from_the_op_that_launched_it(stack_index, module, launch_op, kind):
    """The kernel's own name (elementwise_kernel<...>) names no op; the launching aten op does."""
    name = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&)>(int)"
    row = ProfiledKernel(name=name, module=module, launch_op=launch_op, total_time_us=10.0)
    found = identify_row(row, 0.1, "gpt-oss-20b", "bfloat16", stack_index, None)
    assert (found.kind, found.kind_evidence, found.kernel_type) == (kind, "module", "aten")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("fused_inplace_qknorm", "qk_norm"),  # SGLang's per-head q/k norm and its kernel
        ("void QKNormKernel<256, true, __nv_bfloat16>::run(tvm::ffi::TensorView)", "qk_norm"),
        ("QKNormAcrossHeadsKernel", "other"),  # whole token rows, not heads
        ("fused_qk_norm_rope", "other"),  # vLLM's: norm and rope in one kernel, no one task of ours
        ("_fused_qk_rmsnorm_rope_gate_kernel", "other"),
        ("_rms_norm_forward_kernel", "rms_norm"),
    ],
)
def test_a_per_head_qk_norm_is_told_apart_by_its_name_only(name, kind):
    from apex_core.identify.kinds import kind_from_name

    assert kind_from_name(name) == kind
    # transformers' q_norm is the model's RMSNorm class: no module rule can tell it from the row norm
    assert kind_from_module("Qwen3_5RMSNorm", "aten::mul") == "rms_norm"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # PyTorch's LayerNorm kernels (Falcon's input_layernorm and ln_f under transformers), its ops
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float, "
         "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", "layer_norm"),
        ("void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<c10::BFloat16, float>(long, float const*, "
         "float const*, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16*)", "layer_norm"),
        ("aten::native_layer_norm", "layer_norm"),
        ("_layer_norm_forward_kernel", "layer_norm"),  # Liger
        ("layernorm2d_fwd", "layer_norm"),  # aiter
        # fused with a residual add or a quantization, or gated: no task of ours replaces those
        ("layernorm2d_fwd_with_add", "other"),
        ("_fused_add_layernorm_kernel", "other"),
        ("layernorm2d_fwd_with_dynamicquant", "other"),
        ("SkipLayerNormKernelSmallVectorized", "other"),
        ("layer_norm_gated_fwd_kernel", "other"),
        # RMSNorm names stay RMSNorm
        ("_rms_norm_forward_kernel", "rms_norm"),
        ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, long, int)", "rms_norm"),
        ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)", "fused_add_rms_norm"),
    ],
)
def test_a_layer_norm_is_told_from_an_rms_norm_by_its_name(name, kind):
    from apex_core.identify.kinds import kind_from_name

    assert kind_from_name(name) == kind


@pytest.mark.parametrize(
    ("module", "op", "kind"),
    [
        ("LayerNorm", "aten::native_layer_norm", "layer_norm"),  # torch.nn.LayerNorm: Falcon's norms
        ("FalconLayerNorm", "aten::sub", "layer_norm"),  # a model's own LayerNorm class, by its ops
        ("AdaLayerNorm", "aten::addmm", None),  # an adaptive norm's projection is no norm
        ("GatedLayerNorm", "aten::mul", None),
        ("T5LayerNorm", "aten::pow", "rms_norm"),  # T5's "LayerNorm" has no mean and no bias
        ("LlamaRMSNorm", "aten::pow", "rms_norm"),
        ("FalconDecoderLayer", "aten::add", None),  # the residual add around the parallel block
    ],
)
def test_layer_norm_modules_name_the_layer_norm_kind_and_rms_norm_modules_keep_theirs(module, op, kind):
    assert kind_from_module(module, op) == kind


def test_falcons_pytorch_layer_norm_kernel_maps_to_its_task(stack_index):
    name = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float, "
            "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)")
    row = ProfiledKernel(name=name, module="LayerNorm", launch_op="aten::native_layer_norm", total_time_us=10.0)
    found = identify_row(row, 0.1, "falcon-7b-instruct", "bfloat16", stack_index, None)
    assert (found.kind, found.kernel_type, found.task_ids) == ("layer_norm", "aten", ["falcon-7b-instruct__layer_norm"])
    # Llama's norm is an RMSNorm: no layer_norm task stands for it
    llama = identify_row(ProfiledKernel(name=name, total_time_us=10.0), 0.1, LLAMA, "bfloat16", stack_index, None)
    assert (llama.kind, llama.task_ids) == ("layer_norm", [])


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        # FlashInfer's fused filters and vLLM's own (function and module path): the sampler
        ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024, (cub::BlockScanAlgorithm)2, "
         "(cub::BlockReduceAlgorithm)2, 4u, false, float, int>(float*, int*, int*, float*, int*, unsigned int, float, unsigned int, "
         "unsigned long, unsigned long)", "top_k_top_p_sampling"),
        ("void flashinfer::sampling::TopPRenormProbKernel<1024, (cub::BlockReduceAlgorithm)2, 4u, float>(float*, float*, float*, "
         "float, unsigned int)", "top_k_top_p_sampling"),
        ("TopKMaskLogitsKernel", "top_k_top_p_sampling"),
        ("top_k_top_p_sampling_from_logits", "top_k_top_p_sampling"),
        ("apply_top_k_top_p", "top_k_top_p_sampling"),
        ("vllm.v1.sample.ops.topk_topp_sampler", "top_k_top_p_sampling"),
        # not a sampler: a MoE router's top-k, and filters no task of ours runs
        ("topk_softmax", "moe_router"),
        ("MinPSamplingFromProbKernel", None),
        ("SamplingFromProbKernel", None),
    ],
)
def test_sampler_kernels_are_told_apart_by_their_filters_names(name, kind):
    from apex_core.identify.kinds import kind_from_name

    assert kind_from_name(name) == kind


@pytest.mark.parametrize(
    ("module", "op", "kind"),
    [
        ("TopKTopPSampler", "aten::sort", "top_k_top_p_sampling"),
        ("TopKTopPSampler", "aten::topk", "top_k_top_p_sampling"),  # apply_top_k_only
        ("Sampler", "aten::div_", "top_k_top_p_sampling"),  # the temperature
        ("Sampler", "aten::cumsum", "top_k_top_p_sampling"),
        ("Sampler", "aten::argmax", "top_k_top_p_sampling"),  # the exponential race
        ("Sampler", "aten::log_softmax", None),  # logprobs: not the sampler's draw
        ("Sampler", "aten::topk", None),  # the logprobs' top-k, or a top-k filter: cannot be told apart
        ("RejectionSampler", "aten::cumsum", None),  # speculative decoding's
        ("LogitsProcessor", "aten::tanh", "top_k_top_p_sampling"),  # Gemma 2's final soft-cap
        ("LogitsProcessor", "aten::mm", None),  # the lm_head
    ],
)
def test_sampler_modules_name_the_sampling_kind_only_for_the_samplers_ops(module, op, kind):
    assert kind_from_module(module, op) == kind
