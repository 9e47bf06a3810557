"""Google's Gemma 2: GQA alternating sliding-window and full attention, GeGLU, logit soft-capping, sandwich RMSNorm."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

# Each decoder layer has four RMSNorms: input_layernorm (pre-attention), post_attention_layernorm,
# pre_feedforward_layernorm and post_feedforward_layernorm (transformers' Gemma2DecoderLayer; NeMo
# maps the same four). All of them, and the final norm, scale by (1 + weight): transformers'
# Gemma2RMSNorm initialises weight to zeros and returns output * (1.0 + weight)
# (src/transformers/models/gemma2/modeling_gemma2.py); NeMo / Megatron-Bridge call it
# layernorm_zero_centered_gamma.
# Layer 0 is a sliding-window layer and the kinds alternate from there: Gemma2Config builds
# layer_types as "sliding_attention" for even indices, "full_attention" for odd ones (older
# transformers: sliding_window if not layer_idx % 2).
# NeMo's Gemma2DotProductAttention windows layers whose 1-based number is even, i.e. the opposite
# order; the transformers order is taken.
_LAYER_PATTERN = ["sliding_attention", "full_attention"]

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="google/gemma-2-9b-it",
        family="gemma2",
        hidden_size=3584,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,  # explicit in the config; hidden_size / heads would be 224
        num_hidden_layers=42,
        intermediate_size=14336,
        vocab_size=256000,
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="geglu",
        max_position_embeddings=8192,
        rope_theta=10000.0,
        rope_scaling="none",
        tie_word_embeddings=True,
        # Megatron-Bridge's fixtures (not tied to the -it checkpoints) say float32; the -it config
        # copy and fitmygpu's checkpoint notes say bfloat16.
        dtype="bfloat16",
        parameters_b=9.24,  # openlaboratory.ai/models/gemma-2-9b: "approximately 9.24 billion parameters"
        extra={
            "sliding_window": 4096,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            # transformers' convert_gemma2_weights_to_hf.py and maxtext's hf_model_configs.py write
            # 224; the copy of this config, NeMo, Megatron-Bridge and transformers' PaliGemma 2
            # converter all have 256 (= head_dim), which is taken.
            "query_pre_attn_scalar": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "layer_pattern": list(_LAYER_PATTERN),
            "rms_norm_zero_centered": True,
        },
        source="https://huggingface.co/google/gemma-2-9b-it/blob/main/config.json",
        verified_against=(
            "kevinstephano/thunder_model_blocks: thunder_model_blocks/gemma2/gemma2_config.py (config of this model)",
            "NVIDIA/NeMo: nemo/collections/llm/gpt/model/gemma2.py (Gemma2Config / Gemma2Config9B)",
            "NVIDIA-NeMo/Megatron-Bridge: tests/unit_tests/models/gemma/test_gemma2_bridge.py (9B config fixture)",
            "huggingface/transformers: src/transformers/models/paligemma/convert_paligemma2_weights_to_hf.py (9b)",
            "https://www.fitmygpu.com/models/gemma-2-9b (official 9B-IT checkpoint is bfloat16)",
        ),
    ),
    ModelConfig(
        hf_id="google/gemma-2-27b-it",
        family="gemma2",
        hidden_size=4608,
        num_attention_heads=32,
        num_key_value_heads=16,
        head_dim=128,  # explicit in the config; hidden_size / heads would be 144
        num_hidden_layers=46,
        intermediate_size=36864,
        vocab_size=256000,
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="geglu",
        # vllm-project/vllm#15120 posts a 27B config with 32768 / rope_theta 160000 /
        # sliding_window 32768 (its sliding_window_size still 4096): a locally edited copy; every
        # other copy has 8192 / 10000 / 4096.
        max_position_embeddings=8192,
        rope_theta=10000.0,
        rope_scaling="none",
        tie_word_embeddings=True,
        dtype="bfloat16",
        parameters_b=27.2,  # openlaboratory.ai/models/gemma-2-27b: "27.2 billion parameters"
        extra={
            "sliding_window": 4096,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "query_pre_attn_scalar": 144,  # hidden_size / num_attention_heads, not head_dim, in the 27B
            "hidden_activation": "gelu_pytorch_tanh",
            "layer_pattern": list(_LAYER_PATTERN),
            "rms_norm_zero_centered": True,
        },
        source="https://huggingface.co/google/gemma-2-27b-it/blob/main/config.json",
        verified_against=(
            "NVIDIA-NeMo/Megatron-Bridge: tests/unit_tests/models/gemma/test_gemma2_bridge.py (27B config fixture)",
            "NVIDIA/NeMo: nemo/collections/llm/gpt/model/gemma2.py (Gemma2Config27B; not head_dim, which it leaves at 256)",
            "huggingface/transformers: src/transformers/models/gemma2/convert_gemma2_weights_to_hf.py (gemma_27b_config)",
            "AI-Hypercomputer/maxtext: MaxText/utils/ckpt_conversion/utils/hf_model_configs.py (gemma2_27b_config)",
            "https://github.com/vllm-project/vllm/issues/15120 (27B config; shapes, soft-caps and bfloat16 match)",
            "https://www.fitmygpu.com/models/gemma-2-27b (official 27B-IT checkpoint is bfloat16)",
        ),
    ),
)
