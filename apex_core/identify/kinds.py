"""What a kernel is: its kind (one of our kernel families, or "other") and its kernel type.

Three kinds of evidence, tried in this order (docs/identify.md says why):

1. the source index's hit: the kernel's own name, then its module path (``liger_kernel.ops.rms_norm``,
   ``fla.ops.gated_delta_rule.chunk``), which says more than a name that a profiler may shorten;
2. the innermost ``nn.Module`` class the profiler saw the kernel under (``LlamaRMSNorm``): for the
   many small PyTorch kernels (``aten::mul``, ``aten::pow``) whose names say nothing;
3. the kernel's name alone: library and extension kernels (``vllm::rms_norm_kernel``, cuBLAS and
   CUTLASS GEMMs) with no module recorded.

Every pattern here is anchored on words that name an operation (``rms_norm``, ``gated_delta``),
never on fragments that occur by chance, and a rule may say "other" to stop a near miss
(``RMSNormGated`` is not an RMSNorm). GEMM kinds need a dtype: our families are bf16 and fp8;
an MXFP4 GEMM (gemm_mxfp4) is named by its weight format.
"""

from __future__ import annotations

import re
from typing import Literal

from apex_core.profiling.names import strip_balanced

KERNEL_KINDS: tuple[str, ...] = (
    "rms_norm", "fused_add_rms_norm", "rope", "silu_and_mul", "gelu_tanh_and_mul", "swiglu_clamped", "gemm_bf16", "gemm_fp8",
    "fused_moe", "moe_router", "paged_decode_attention", "prefill_attention", "mla_decode",
    "gated_delta_rule", "causal_conv1d", "fp8_quant", "reshape_and_cache", "qk_norm", "layer_norm",
    "top_k_top_p_sampling", "gemm_mxfp4",
)
"""Our kernel families (apex_core/kernels/*), the kinds a kernel can be mapped to besides "other"."""

OTHER = "other"
GEMM = "gemm"
"""A GEMM before its dtype is known; ``gemm_kind`` turns it into gemm_bf16, gemm_fp8 or other."""

KernelType = Literal["triton", "native", "aten", "cublas", "cutlass", "hipblaslt", "rocblas", "ck", "asm", "cudnn", "miopen", "other"]
KERNEL_TYPES: tuple[str, ...] = ("triton", "native", "aten", "cublas", "cutlass", "hipblaslt", "rocblas", "ck", "asm", "cudnn", "miopen", "other")
LIBRARY_TYPES = frozenset({"cublas", "cutlass", "hipblaslt", "rocblas", "ck", "asm", "cudnn", "miopen"})
"""Kernels that ship compiled inside a vendor library: no Python-level source to replace."""


def _rules(*pairs: tuple[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, re.I), kind) for pattern, kind in pairs)


NAME_RULES = _rules(
    # MXFP4 weights (GPT-OSS's experts): a GEMM on them by its format's name, triton_kernels'
    # matmul_ogs (what vLLM and SGLang run GPT-OSS's MXFP4 experts with) and an FP4 weight dequant
    # feeding a bf16 GEMM. Not a quantization of activations to MXFP4 (aiter's dynamic_mxfp4_quant).
    (r"(?<!de)quant\w*mxfp4|mxfp4\w*(?<!de)quant", OTHER),
    (r"mxfp4|matmul_ogs|dequant\w*fp4|fp4\w*(?:gemm|matmul)|(?:gemm|matmul)\w*fp4", "gemm_mxfp4"),
    (r"w8a8|fp8\w*_(?:matmul|gemm|mm)\b|(?:matmul|gemm)\w*fp8|_scaled_mm|scaled_mm", "gemm_fp8"),
    (r"grouped_?(?:gemm|mm)|group_gemm|fused_moe|moe_(?:forward|kernel|gemm|mlp|align|sum)|fmoe", "fused_moe"),
    (r"fused_add_rms_?norm|add_rms_?norm|rms_?norm\w*residual|residual\w*rms_?norm|skip_rms", "fused_add_rms_norm"),
    # Per-head q/k norms by name (SGLang's fused_inplace_qknorm, its QKNormKernel). Not a kernel
    # that also applies rope (vLLM's fused_qk_norm_rope, fused_qk_rmsnorm_rope_gate): no one task
    # of ours replaces both; nor SGLang's qknorm_across_heads, which normalizes whole token rows.
    # transformers runs q_norm/k_norm as the model's RMSNorm class: told from rms_norm by no name.
    (r"qk_?(?:rms_?)?norm\w*rope|qk_?norm_?across", OTHER),
    (r"qk_?(?:rms_?)?norm", "qk_norm"),
    (r"rms_?norm\w*gate|gated\w*rms_?norm|norm_gate", OTHER),
    (r"rms_?norm", "rms_norm"),
    # LayerNorm (a mean and a bias: Falcon's): PyTorch's vectorized_layer_norm_kernel and
    # LayerNormForwardCUDAKernel under aten::native_layer_norm, aiter's layernorm2d_fwd, Liger's
    # _layer_norm_forward_kernel. Not one fused with a residual add or a quantization (aiter's
    # layernorm2d_fwd_with_add, onnxruntime's SkipLayerNorm): no task of ours replaces those. Gated
    # ones (fla's layer_norm_gated_fwd_kernel) are stopped by the norm_gate rule above.
    (r"(?:add|skip|residual|quant)\w*layer_?norm|layer_?norm\w*(?:_add|residual|quant)", OTHER),
    (r"layer_?norm", "layer_norm"),
    (r"swiglu\w*(?:clamp|limit|oai)|clamp\w*swiglu", "swiglu_clamped"),
    # vLLM's act_and_mul_kernel takes its activation as a template argument: GELU's tanh form is GeGLU
    (r"gelu_tanh_and_mul|gelu_tanh_mul|geglu|act_and_mul\w*<.*gelu_tanh", "gelu_tanh_and_mul"),
    (r"silu_and_mul|silu_mul|act_and_mul|swiglu", "silu_and_mul"),
    (r"rope\b|_rope|rope_|rotary|rotate_half", "rope"),
    (r"per_token(?:_group)?_quant|(?:fp8|f8|e4m3)\w*(?<!de)quant|(?<!de)quant\w*(?:fp8|f8|e4m3)|scaled_fp8_quant", "fp8_quant"),
    (r"reshape_and_cache|concat_and_cache|store_kvcache", "reshape_and_cache"),
    (r"flash_?mla|mla\w*decode|decode\w*mla", "mla_decode"),
    (r"paged_?attention|paged_attn|decode_attention|decode_attn|flash_decoding|split_?kv", "paged_decode_attention"),
    (r"flash_?attn|flash_fwd|fmha|context_attention|prefix_prefill|prefill\w*attention|_attn_fwd|scaled_dot_product|efficient_attention", "prefill_attention"),
    (r"gated_delta|delta_rule|gdn_", "gated_delta_rule"),
    (r"causal_conv1d|conv1d|conv_depthwise", "causal_conv1d"),
    # The sampler's filters: vLLM's apply_top_k_top_p (and its module topk_topp_sampler), FlashInfer's
    # and aiter's top_k_top_p_sampling_from_probs, TopPSamplingFromProbKernel, TopKRenormProbKernel,
    # TopKMaskLogitsKernel. Not a plain sampling_from_probs or a min-p one: no filter of ours.
    (r"top_?k_?top_?p|top_?[kp]_?(?:sampling|renorm|mask_?logits)|apply_top_k", "top_k_top_p_sampling"),
    (r"topk_softmax|topk_sigmoid|grouped_topk|moe_router|router_logits|noaux_tc", "moe_router"),
    (r"gemm|gemv|matmul|cublas|cutlass|xmma|nvjet|^cijk_|hipblaslt|rocblas|wgmma|^aten::(?:mm|addmm|bmm|linear|baddbmm|addmv|mv)$", GEMM),
)
"""Operation names, most specific first (fused_add_rms_norm before rms_norm, fp8 GEMMs before GEMMs)."""

_ELEMENTWISE = r"aten::(?:mul|add|sub|neg|cat|slice|div|pow|rsqrt|mean|sigmoid|silu|copy_|to|_to_copy|clamp|minimum|maximum)"
_ROPE_OPS = r"aten::(?:mul|add|sub|neg|cat|slice)"
"""What ``apply_rotary_pos_emb`` runs: ``q * cos + rotate_half(q) * sin``, rotate_half a neg and a cat."""
_LAYOUT_COPIES = r"aten::(?:copy_|clone|contiguous|reshape|_to_copy|to|index_copy_?|index_put_?|expand|_unsafe_view)$"

MODULE_RULES: tuple[tuple[re.Pattern[str], re.Pattern[str] | None, str], ...] = tuple(
    (re.compile(module), re.compile(op, re.I) if op else None, kind)
    for module, op, kind in (
        (r"(?:Add|Residual)RMSNorm", None, "fused_add_rms_norm"),
        (r"RMSNormGated|GatedRMSNorm|NormGate", None, OTHER),
        (r"RMSNorm|RmsNorm", None, "rms_norm"),
        # T5's "LayerNorm" subtracts no mean and adds no bias: an RMSNorm under another name.
        (r"T5LayerNorm$", None, "rms_norm"),
        # torch.nn.LayerNorm (Falcon's input_layernorm and ln_f) and classes named like it; only a
        # norm's ops, so an adaptive LayerNorm's projection is not taken for the norm.
        (r"^(?!\w*Gated)\w*LayerNorm$", r"layer_norm|^aten::(?:var_mean|var|mean|sub|mul|add|rsqrt|pow|div|to|_to_copy|copy_)$",
         "layer_norm"),
        (r"RotaryEmbedding", None, "rope"),
        (r"GatedDeltaNet|GatedDeltaRule", r"conv", "causal_conv1d"),
        (r"GatedDeltaNet|GatedDeltaRule", None, "gated_delta_rule"),
        (r"^Conv1d$|ShortConvolution|CausalConv1d", None, "causal_conv1d"),
        (r"TopkRouter|TopKRouter|Router$", r"mm|matmul|linear|gemm", GEMM),  # the router's projection
        (r"TopkRouter|TopKRouter|Router$", None, "moe_router"),
        # GPT-OSS's experts gate their GEMMs' output with a clamped SwiGLU (``_apply_gate``): the
        # elementwise ops under the experts are that activation, the GEMMs the MoE itself.
        (r"GptOss\w*Experts$", _ELEMENTWISE, "swiglu_clamped"),
        (r"Experts$|SparseMoeBlock$|MoE$|Moe$", None, "fused_moe"),
        (r"^Linear$|^LinearBase$|ParallelLinear$|ReplicatedLinear$", None, GEMM),
        (r"Attention$|Attn$", r"paged|decode", "paged_decode_attention"),
        # Copies in an Attention are the KV cache's (its update, and repeat_kv's GQA expansion of the
        # whole cache before sdpa: 28% of an 8-layer Llama's decode on an H200, once taken for rope).
        (r"Attention$|Attn$", _LAYOUT_COPIES, OTHER),
        (r"Attention$|Attn$", _ROPE_OPS, "rope"),
        (r"Attention$|Attn$", r"mm|matmul|softmax|attention|attn|fmha|flash", "prefill_attention"),
        # vLLM's sampler: everything under TopKTopPSampler is the top-k/top-p filter and its draw;
        # under Sampler only the temperature, softmax, sort, cumsum and the exponential race are (its
        # penalties, log_softmax and logprobs' topk are not ours); Gemma 2's final soft-cap is the
        # tanh under LogitsProcessor (whose GEMM is the lm_head).
        (r"^TopKTopPSampler$", None, "top_k_top_p_sampling"),
        (r"^Sampler$", r"^aten::(?:sort|_?softmax|cumsum|exponential_|div_?|argmax|scatter_?|masked_fill_?)$",
         "top_k_top_p_sampling"),
        (r"^LogitsProcessor$", r"^aten::tanh_?$", "top_k_top_p_sampling"),
        (r"^SiLU$|SiLUActivation", None, "silu_and_mul"),
        # Gemma's GeGLU: the tanh-approximated GELU runs in its activation module, the multiply by
        # up in the MLP itself. (Falcon's ungated MLP uses GELUActivation, the exact GELU: no kind.)
        (r"^GELUTanh$|PytorchGELUTanh", None, "gelu_tanh_and_mul"),
        (r"^Gemma\w*MLP$", _ELEMENTWISE, "gelu_tanh_and_mul"),
        # cpu-mini's MLP: its projections are child Linear modules, so its own time is the activation.
        (r"^TaskMLP$", None, "silu_and_mul"),
        (r"MLP$", _ELEMENTWISE, "silu_and_mul"),
    )
)
"""Innermost module class -> kind. In an Attention module (with sdpa, transformers' default) the
arithmetic ops are the rotary embedding's and the copies the KV cache's; in a gated-SwiGLU MLP the
elementwise ops are silu(gate) * up."""


def kind_from_name(text: str) -> str | None:
    """The kind a name or dotted path says, or None when it says nothing we recognize."""
    for pattern, kind in NAME_RULES:
        if pattern.search(text):
            return kind
    return None


def kind_from_source(kernel_name: str, module: str | None) -> str | None:
    """A source hit's kind: its name first, then the module path it is defined in."""
    return kind_from_name(kernel_name) or (kind_from_name(module) if module else None)


def kind_from_module(module_class: str | None, op_name: str) -> str | None:
    """The kind the innermost module class gives the op ``op_name`` (None where the class says nothing)."""
    if not module_class:
        return None
    for class_pattern, op_pattern, kind in MODULE_RULES:
        if class_pattern.search(module_class) and (op_pattern is None or op_pattern.search(op_name)):
            return kind
    return None


def gemm_kind(name: str, dtype: str) -> str:
    """gemm_fp8 / gemm_bf16 from the kernel name's dtype marks, else from the workload's dtype."""
    lowered = name.lower()
    if re.search(r"e4m3|e5m2|fp8|f8f8|_f8_|float8", lowered):
        return "gemm_fp8"
    if re.search(r"bf16|bfloat16|bf16bf16", lowered) or dtype in ("bfloat16", "float16"):
        return "gemm_bf16"
    return OTHER


def qualified_base(name: str) -> str:
    """``at::native::foo`` from ``void at::native::foo<...>(...)``: namespaces kept, the rest dropped."""
    text = strip_balanced(strip_balanced(name.strip(), "(", ")"), "<", ">").strip()
    return text.rsplit(" ", 1)[-1]


_TYPE_RULES: tuple[tuple[re.Pattern[str], str], ...] = _rules(
    (r"cublas|nvjet|xmma|^(?:ampere|hopper|volta|turing|sm\d+)_\w*(?:gemm|gemv)|gemv2?[nt]?_kernel|gemmk1|splitkreduce", "cublas"),
    (r"cutlass|cute::", "cutlass"),
    (r"rocblas", "rocblas"),
    (r"^cijk_|hipblaslt|tensile", "hipblaslt"),
    (r"\bck::|ck_tile|ck_fmha|device_gemm_xdl|kernel_gemm_xdl", "ck"),
    (r"\basm\b|_asm_|^fmoe_|aiter::\w*asm", "asm"),
    (r"cudnn|^cudnn|implicit_convolve|winograd", "cudnn"),
    (r"miopen", "miopen"),
)


def kernel_type(name: str, has_triton_source: bool) -> str:
    """Where the kernel comes from, as the ``--kernel-types`` filter names it.

    triton: a Triton kernel (indexed, or Inductor's generated ``triton_poi_*``/``triton_red_*``);
    aten: PyTorch's own operators and kernels; the vendor libraries by name; native: other
    compiled CUDA/HIP C++ (extension modules such as vllm/_C.so); other: copies, memsets, the rest.
    """
    if has_triton_source:
        return "triton"
    base = qualified_base(name)
    for pattern, library in _TYPE_RULES:
        if pattern.search(name) or pattern.search(base):
            return library
    if name.startswith("aten::") or base.startswith(("at::", "at_cuda_detail", "(anonymous namespace)::", "c10::")):
        return "aten"
    if re.match(r"triton_(?:poi|red|per|tem|for|mm|bmm|\w+_fused)", name):
        return "triton"
    if re.match(r"(?:memcpy|memset|cudamemcpy|hipmemcpy)", name, re.I):
        return "other"
    if "::" in base or name.startswith(("_Z", "void ")):
        return "native"
    return "other"
