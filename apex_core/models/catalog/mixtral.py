"""Mistral AI's Mixtral: the Mistral decoder with every MLP replaced by 8 SwiGLU experts, top-2 softmax routing."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="mistralai/Mixtral-8x7B-Instruct-v0.1",
        family="mixtral",
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=32,
        intermediate_size=14336,  # the width of each expert; there is no dense MLP
        vocab_size=32000,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="moe",
        num_experts=8,
        experts_per_token=2,
        moe_intermediate_size=14336,
        router_scoring="softmax",  # softmax over the router logits, renormalised over the top 2
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=46.7,  # Mistral AI's announcement: 46.7B total parameters
        extra={
            "sliding_window": None,
            "router_aux_loss_coef": 0.02,
        },
        source="https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1/blob/main/config.json",
        verified_against=(
            "NVIDIA/TensorRT-LLM: tests/unittest/_torch/modeling/test_modeling_mixtral.py (MIXTRAL_8X7B_CONFIG, full copy)",
            "scaleapi/llm-engine: model-engine/tests/unit/domain/test_llm_use_cases.py (mixtral-8x7b config copy)",
            "Cerebras/modelzoo: src/cerebras/modelzoo/models/nlp/mixtral/configs/params_mixtral_8x7b.yaml",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/mixtral-8x7b.yml",
            "Lightning-AI/litgpt: litgpt/config.py (Mixtral-8x7B-{,Instruct-}v0.1 entry)",
        ),
    ),
    ModelConfig(
        hf_id="mistralai/Mixtral-8x22B-Instruct-v0.1",
        family="mixtral",
        hidden_size=6144,
        num_attention_heads=48,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=56,
        intermediate_size=16384,  # the width of each expert; there is no dense MLP
        # the Instruct release uses the v3 tokenizer (32768); the base 8x22B config copies
        # (llm-engine, Cerebras) still say 32000, which is the base checkpoint, not this one
        vocab_size=32768,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="moe",
        num_experts=8,
        experts_per_token=2,
        moe_intermediate_size=16384,
        router_scoring="softmax",  # softmax over the router logits, renormalised over the top 2
        max_position_embeddings=65536,
        rope_theta=1000000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",  # seen only in a copy of the base 8x22B config
        parameters_b=141.0,  # Mistral AI's announcement: 141B total (39B active) parameters
        extra={
            # no copy of the Instruct config shows this key; None is the 8x7B value and the class default
            "sliding_window": None,
            "router_aux_loss_coef": 0.001,  # seen only in copies of the base 8x22B config
        },
        source="https://huggingface.co/mistralai/Mixtral-8x22B-Instruct-v0.1/blob/main/config.json",
        verified_against=(
            "Lightning-AI/litgpt: litgpt/config.py (Mixtral-8x22B entry, made from this config.json)",
            "Lightning-AI/litgpt pull request 1845 review: vocab_size 32768 at line 28 of this config.json",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/mixtral-8x22b.yml (v3 tokenizer, vocab 32768)",
            "scaleapi/llm-engine: model-engine/tests/unit/domain/test_llm_use_cases.py (base mixtral-8x22b config copy)",
            "Cerebras/modelzoo: src/cerebras/modelzoo/models/nlp/mixtral/configs/params_mixtral_8x22b.yaml (base model)",
        ),
    ),
)
