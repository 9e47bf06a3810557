"""Qwen3.5: hybrid layers (gated DeltaNet linear attention, and gated full attention every fourth layer)."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="Qwen/Qwen3.5-27B",
        family="qwen3.5",
        hidden_size=5120,
        num_attention_heads=24,
        num_key_value_heads=4,
        head_dim=256,  # explicit in the config, not hidden_size / heads
        num_hidden_layers=64,
        intermediate_size=17408,
        vocab_size=248320,
        rms_norm_eps=1e-6,
        attention="hybrid_gqa_gated_deltanet",
        mlp="swiglu",
        max_position_embeddings=262144,
        rope_theta=10_000_000.0,
        rope_scaling="none (mrope, partial_rotary_factor 0.25)",
        parameters_b=27.0,  # card: "Number of Parameters: 27B" (also apxml.com/models/qwen35-27b)
        extra={
            "full_attention_interval": 4,
            "layer_pattern": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 48,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "attn_output_gate": True,
            "partial_rotary_factor": 0.25,
            "rms_norm_zero_centered": True,
            # Not a config key: transformers' Qwen3_5Attention (and Qwen3_5MoeAttention) always builds
            # q_norm and k_norm, RMSNorms over head_dim applied per head before rope (zero-centered).
            "qk_norm": True,
        },
        source="https://huggingface.co/Qwen/Qwen3.5-27B/blob/main/config.json (text_config)",
        verified_against=(
            "https://huggingface.co/Qwen/Qwen3.5-27B/commit/3b2962802c141fcffb992b4e13e4cf9012fdaa13 (model card)",
            "THUDM/slime: scripts/models/qwen3.5-27B.sh",
            "https://raw.githubusercontent.com/vllm-project/recipes/main/models/Qwen/Qwen3.5-27B.yaml",
        ),
    ),
    ModelConfig(
        hf_id="Qwen/Qwen3.5-35B-A3B",
        family="qwen3.5-moe",
        hidden_size=2048,
        num_attention_heads=16,
        num_key_value_heads=2,
        head_dim=256,  # explicit in the config, not hidden_size / heads
        num_hidden_layers=40,
        # The text_config has no intermediate_size (transformers' Qwen3_5MoeTextConfig removes
        # it): every layer is MoE, so this carries the expert width.
        intermediate_size=512,
        vocab_size=248320,
        rms_norm_eps=1e-6,
        attention="hybrid_gqa_gated_deltanet",
        mlp="moe_shared",
        num_experts=256,
        experts_per_token=8,
        num_shared_experts=1,  # shared_expert_intermediate_size > 0, behind a sigmoid gate
        moe_intermediate_size=512,
        router_scoring="softmax",  # softmax over all 256 logits, top-8 kept and renormalized
        max_position_embeddings=262144,
        rope_theta=10_000_000.0,
        rope_scaling="none (mrope, partial_rotary_factor 0.25)",
        parameters_b=35.0,  # "35B total/3B active": transformers docs (qwen3_5_moe.md), vLLM recipe
        extra={
            "full_attention_interval": 4,
            "layer_pattern": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "attn_output_gate": True,
            "partial_rotary_factor": 0.25,
            "rms_norm_zero_centered": True,
            # Not a config key: transformers' Qwen3_5Attention (and Qwen3_5MoeAttention) always builds
            # q_norm and k_norm, RMSNorms over head_dim applied per head before rope (zero-centered).
            "qk_norm": True,
            "shared_expert_intermediate_size": 512,
            # Not a config key: transformers' Qwen3_5MoeTopKRouter always divides the top-k by their sum.
            "norm_topk_prob": True,
        },
        source="https://huggingface.co/Qwen/Qwen3.5-35B-A3B/blob/main/config.json (text_config)",
        verified_against=(
            "mindspore-ai/hyper-parallel: hyper_parallel/models/qwen3_5_moe/__init__.py"
            " (_DEFAULTS, taken from the config.json text_config)",
            "THUDM/slime: scripts/models/qwen3.5-35B-A3B.sh",
            "dishierweidu/qwen3-test: tests/fixtures/qwen35/public_config_contract.json (revision 59d61f3)",
            "https://raw.githubusercontent.com/vllm-project/recipes/main/models/Qwen/Qwen3.5-35B-A3B.yaml",
            "huggingface/transformers: Qwen3_5MoeTextConfig defaults (checkpoint Qwen/Qwen3.5-35B-A3B)"
            " and Qwen3_5MoeTopKRouter",
        ),
    ),
)
