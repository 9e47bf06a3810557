"""How each architecture family of the model registry becomes a transformers configuration.

One entry per family: the transformers configuration classes that build it (the first the
installed version has) and a function giving the family's own keyword arguments from the
registry entry, merged over the keys every decoder shares (``common_kwargs``). The numbers all
come from the registry; only the depth may be reduced. Where transformers builds a model
differently from the published one, ``Family.differences`` says how (shown with the workload).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from apex_core.models import ModelConfig
from apex_core.workloads.rope import rope_parameters

CPU_MINI_SHAPE = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256,
                  "vocab_size": 512, "max_position_embeddings": 1024}
"""cpu-mini's numbers beyond the registry's (which has only the norm's width and eps): small
enough for a few MB of float32 weights."""

Kwargs = dict[str, Any]


@dataclass(frozen=True)
class Family:
    config_classes: tuple[str, ...]
    kwargs: Callable[[ModelConfig, int], Kwargs]
    """(registry entry, layers to build) -> the family's own configuration keys."""
    architecture: str
    """The causal-LM class a config.json names (``architectures``), which vLLM and SGLang load."""
    differences: str = ""
    shares_common_keys: bool = True
    """False where the configuration names even the shared keys its own way (Falcon)."""
    drops: tuple[str, ...] = ()
    """Shared keys the configuration refuses (Qwen3.5-MoE has no dense intermediate size)."""


def common_kwargs(model: ModelConfig, layers: int) -> Kwargs:
    """The keys every decoder family's configuration shares."""
    return {
        "vocab_size": model.vocab_size,
        "hidden_size": model.hidden_size,
        "intermediate_size": model.intermediate_size,
        "num_hidden_layers": layers,
        "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": model.num_key_value_heads,
        "rms_norm_eps": model.rms_norm_eps,
        "max_position_embeddings": model.max_position_embeddings,
        "rope_parameters": rope_parameters(model),
        "tie_word_embeddings": model.tie_word_embeddings,
    }


def layer_types(model: ModelConfig, layers: int) -> list[str]:
    """The first ``layers`` entries of the model's repeating layer pattern (``extra["layer_pattern"]``)."""
    pattern = [str(kind) for kind in model.extra["layer_pattern"]]  # type: ignore[union-attr]
    return [pattern[i % len(pattern)] for i in range(layers)]


def _synthetic(model: ModelConfig, layers: int) -> Kwargs:
    return {**CPU_MINI_SHAPE, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": True}


def _head_dim(model: ModelConfig, layers: int) -> Kwargs:
    return {"head_dim": model.head_dim}


def _mistral(model: ModelConfig, layers: int) -> Kwargs:
    return {"head_dim": model.head_dim, "sliding_window": model.extra.get("sliding_window")}


def _mixtral(model: ModelConfig, layers: int) -> Kwargs:
    return {**_mistral(model, layers), "intermediate_size": model.moe_intermediate_size or model.intermediate_size,
            "num_local_experts": model.num_experts, "num_experts_per_tok": model.experts_per_token}


def _qwen2(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {"use_sliding_window": bool(extra.get("use_sliding_window", False)), "sliding_window": extra.get("sliding_window"),
            "max_window_layers": min(int(extra.get("max_window_layers", layers)), layers)}  # type: ignore[arg-type]


def _gemma2(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {
        "head_dim": model.head_dim,
        "hidden_activation": extra["hidden_activation"],
        "query_pre_attn_scalar": extra["query_pre_attn_scalar"],
        "sliding_window": extra["sliding_window"],
        "attn_logit_softcapping": extra["attn_logit_softcapping"],
        "final_logit_softcapping": extra["final_logit_softcapping"],
        "layer_types": layer_types(model, layers),
    }


def _phi3(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    rope = rope_parameters(model)
    original = rope.pop("original_max_position_embeddings", None)
    if rope["rope_type"] == "longrope":
        rope["long_factor"], rope["short_factor"] = extra["rope_long_factor"], extra["rope_short_factor"]
        if original:  # the ratio transformers would derive itself, stated so it does not warn
            rope["factor"] = model.max_position_embeddings / original
    kwargs: Kwargs = {"rope_parameters": rope, "sliding_window": extra.get("sliding_window")}
    if original is not None:
        kwargs["original_max_position_embeddings"] = original
    return kwargs


def _falcon(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {  # Falcon's configuration names its keys its own way; the shared ones it lacks are dropped
        "vocab_size": model.vocab_size,
        "hidden_size": model.hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": model.num_attention_heads,
        "num_kv_heads": model.num_key_value_heads,
        "layer_norm_epsilon": model.rms_norm_eps,
        "max_position_embeddings": model.max_position_embeddings,
        "rope_parameters": rope_parameters(model),
        "tie_word_embeddings": model.tie_word_embeddings,
        "ffn_hidden_size": model.intermediate_size,
        "multi_query": bool(extra.get("multi_query", model.attention == "mqa")),
        "parallel_attn": bool(extra.get("parallel_attn", True)),
        "new_decoder_architecture": bool(extra.get("new_decoder_architecture", False)),
        "bias": bool(extra.get("bias", False)),
        "alibi": bool(extra.get("alibi", False)),
    }


def _qwen3_5(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {
        "head_dim": model.head_dim,
        "layer_types": layer_types(model, layers),
        "linear_num_key_heads": extra["linear_num_key_heads"],
        "linear_num_value_heads": extra["linear_num_value_heads"],
        "linear_key_head_dim": extra["linear_key_head_dim"],
        "linear_value_head_dim": extra["linear_value_head_dim"],
        "linear_conv_kernel_dim": extra["linear_conv_kernel_dim"],
    }


def _qwen3_5_moe(model: ModelConfig, layers: int) -> Kwargs:
    return {
        **_qwen3_5(model, layers),
        "num_experts": model.num_experts,
        "num_experts_per_tok": model.experts_per_token,
        "moe_intermediate_size": model.moe_intermediate_size,
        "shared_expert_intermediate_size": model.extra.get("shared_expert_intermediate_size", 0),
    }


def _gpt_oss(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {
        "head_dim": model.head_dim,
        "num_local_experts": model.num_experts,
        "num_experts_per_tok": model.experts_per_token,
        "sliding_window": extra["sliding_window"],
        "layer_types": layer_types(model, layers),
        "attention_bias": bool(extra.get("attention_bias", True)),
        "swiglu_limit": extra["swiglu_limit"],
        "swiglu_alpha": extra["swiglu_alpha"],
    }


def _deepseek_v3(model: ModelConfig, layers: int) -> Kwargs:
    extra = model.extra
    return {
        "moe_intermediate_size": model.moe_intermediate_size,
        "n_routed_experts": model.num_experts,
        "n_shared_experts": model.num_shared_experts,
        "num_experts_per_tok": model.experts_per_token,
        "routed_scaling_factor": extra["routed_scaling_factor"],
        "kv_lora_rank": extra["kv_lora_rank"],
        "q_lora_rank": extra["q_lora_rank"],
        "qk_rope_head_dim": extra["qk_rope_head_dim"],
        "qk_nope_head_dim": extra["qk_nope_head_dim"],
        "v_head_dim": extra["v_head_dim"],
        "n_group": extra["n_group"],
        "topk_group": extra["topk_group"],
        # The real models' first layers are dense; a reduced one keeps at least one MoE layer.
        "first_k_dense_replace": min(int(extra["first_k_dense_replace"]), layers - 1),  # type: ignore[arg-type]
        "norm_topk_prob": True,
    }


_TEXT_ONLY = "the text model only (the checkpoint adds a vision tower)"

FAMILIES: dict[str, Family] = {
    "synthetic": Family(("LlamaConfig",), _synthetic, "LlamaForCausalLM"),
    "llama3": Family(("LlamaConfig",), _head_dim, "LlamaForCausalLM"),
    "mistral": Family(("MistralConfig",), _mistral, "MistralForCausalLM"),
    "mixtral": Family(("MixtralConfig",), _mixtral, "MixtralForCausalLM"),
    "qwen2": Family(("Qwen2Config",), _qwen2, "Qwen2ForCausalLM"),
    "gemma2": Family(("Gemma2Config",), _gemma2, "Gemma2ForCausalLM"),
    "phi3": Family(("Phi3Config",), _phi3, "Phi3ForCausalLM"),
    "falcon": Family(("FalconConfig",), _falcon, "FalconForCausalLM", shares_common_keys=False),
    "qwen3.5": Family(("Qwen3_5TextConfig",), _qwen3_5, "Qwen3_5ForCausalLM", differences=_TEXT_ONLY),
    "qwen3.5-moe": Family(("Qwen3_5MoeTextConfig",), _qwen3_5_moe, "Qwen3_5MoeForCausalLM", differences=_TEXT_ONLY,
                          drops=("intermediate_size",)),
    "gpt-oss": Family(("GptOssConfig",), _gpt_oss, "GptOssForCausalLM", differences="experts in bfloat16 (published in MXFP4)"),
    "deepseek-v3": Family(("DeepseekV3Config",), _deepseek_v3, "DeepseekV3ForCausalLM",
                          differences="no multi-token-prediction layer; weights in bfloat16 (published in FP8 or INT4)"),
}
"""Registry family -> how transformers builds it."""


def family_kwargs(model: ModelConfig, layers: int) -> Kwargs:
    """The keyword arguments of the model's transformers configuration (KeyError: family not mapped)."""
    family = FAMILIES[model.family]
    own = family.kwargs(model, layers)
    if not family.shares_common_keys:
        return own
    shared = {key: value for key, value in common_kwargs(model, layers).items() if key not in family.drops}
    return {**shared, **own}
