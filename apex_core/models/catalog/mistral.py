"""Mistral AI's dense Mistral 7B architecture (GQA, SwiGLU, RMSNorm, RoPE), sliding window off from v0.2 on."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="mistralai/Mistral-7B-Instruct-v0.3",
        family="mistral",
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=32,
        intermediate_size=14336,
        vocab_size=32768,  # v0.3 grew the v0.2 vocabulary (32000) to 32768, as the model card says
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=32768,
        # litgpt's v0.3 entry sets no rope_base and so falls back to its 10000 default; the config
        # copy and maxtext both give 1e6, which is what we keep
        rope_theta=1000000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=7.25,  # Hugging Face model page ("7.25B params"); the model card states no count
        extra={
            "sliding_window": None,
        },
        source="https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3/blob/main/config.json",
        verified_against=(
            "foundation-model-stack/foundation-model-stack: fms/models/mistral.py (docstring copy of this config.json)",
            "Lightning-AI/litgpt: litgpt/config.py (Mistral-7B-Instruct-v0.3 entry)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/mistral-7b.yml (shapes, eps, rope 1e6; vocab 32000 is the pre-v0.3 tokenizer)",
            "https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3 (model card: vocabulary extended to 32768)",
        ),
    ),
)
