"""OpenAI's gpt-oss: MoE with clamped SwiGLU, alternating sliding-window and full attention with sinks."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="openai/gpt-oss-20b",
        family="gpt-oss",
        hidden_size=2880,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_hidden_layers=24,
        intermediate_size=2880,
        vocab_size=201088,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="moe",
        num_experts=32,
        experts_per_token=4,
        moe_intermediate_size=2880,
        router_scoring="softmax",  # softmax over the top-4 router logits
        max_position_embeddings=131072,
        rope_theta=150000.0,
        rope_scaling="yarn (factor 32, beta_fast 32, beta_slow 1, original 4096)",
        parameters_b=21.0,  # model card (the 120b entry's copy): "21B parameters with 3.6B active"
        extra={
            "sliding_window": 128,
            "layer_pattern": ["sliding_attention", "full_attention"],
            "attention_sinks": True,
            "attention_bias": True,
            "swiglu_limit": 7.0,
            "swiglu_alpha": 1.702,
            "expert_quantization": "mxfp4",
        },
        source="https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
        verified_against=(
            "jihengzhang/jihz-gpt-oss-20b: gpt-oss-20b/config.json (mirror)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/gpt-oss-20b.yml",
            "openai/gpt-oss: gpt_oss/torch/model.py (reference implementation)",
        ),
    ),
    ModelConfig(
        hf_id="openai/gpt-oss-120b",
        family="gpt-oss",
        hidden_size=2880,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_hidden_layers=36,
        intermediate_size=2880,
        vocab_size=201088,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="moe",
        num_experts=128,  # num_local_experts; the system we replace listed 16, which is wrong
        experts_per_token=4,
        moe_intermediate_size=2880,
        router_scoring="softmax",  # softmax over the top-4 router logits
        max_position_embeddings=131072,
        rope_theta=150000.0,
        rope_scaling="yarn (factor 32, beta_fast 32, beta_slow 1, original 4096)",
        parameters_b=117.0,  # model card: "117B parameters with 5.1B active"
        extra={
            "sliding_window": 128,
            "layer_pattern": ["sliding_attention", "full_attention"],
            "attention_sinks": True,
            "attention_bias": True,
            "swiglu_limit": 7.0,
            "swiglu_alpha": 1.702,
            "expert_quantization": "mxfp4",
        },
        source="https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json",
        verified_against=(
            "foxl-ai/kiln: tests/test_gpt_oss.py (REAL, a copy of the gpt-oss-120b config.json)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/gpt-oss-120b.yml",
            "daniel-p-green/alain-ai-learning-platform: apps/backend/content/research/openai/gpt-oss-120b/model-card.md"
            " (copy of the model card)",
        ),
    ),
)
