"""Qwen2 (also Qwen2.5 and Qwen2.5-Coder): dense, GQA with biased q/k/v projections, SwiGLU, RMSNorm."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

# Qwen2's q/k/v projections carry a bias (o_proj and the MLP do not). The config.json files have no
# key for it: transformers' Qwen2Attention builds q/k/v with bias=True, the model cards list
# "Attention QKV bias", and NeMo / Megatron-Bridge set add_qkv_bias=True for every Qwen2 size.
# The 7B+ Qwen2.5 models do not tie embeddings (the 0.5B-3B ones do) and use the 152064-row
# vocabulary (151936 is the small models'); every copy below agrees on both.
# sliding_window is inert: use_sliding_window is false in all four configs (some transformers
# versions load it as null for that reason, so some printed copies show null).

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="Qwen/Qwen2.5-7B-Instruct",
        family="qwen2",
        hidden_size=3584,
        num_attention_heads=28,
        num_key_value_heads=4,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=28,
        intermediate_size=18944,
        vocab_size=152064,
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rope_scaling="none",  # the card says to add YaRN (factor 4) by hand only for >32K inputs
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=7.61,  # model card: "Number of Parameters: 7.61B"
        extra={
            "attention_bias": True,
            "use_sliding_window": False,
            "sliding_window": 131072,
            "max_window_layers": 28,
        },
        source="https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json",
        verified_against=(
            "g0t4/examples: 5090/try-vllm/check-model-config.py (vLLM's hf_config printout for this model)",
            "kevinstephano/thunder_model_blocks: hf_qwen2/qwen2_rope.py (config of this model, sliding_window nulled on load)",
            "mindspore-lab/mindformers: research/qwen2_5/predict_qwen2_5_7b_instruct.yaml",
            "NVIDIA-NeMo/Megatron-Bridge: src/megatron/bridge/models/qwen/qwen_provider.py (Qwen25ModelProvider7B)",
            "zyzshishui/slime (slime fork): scripts/models/qwen2.5-7B.sh",
            "ZHUI/paddlenlp_model_readme: Qwen/Qwen2.5-7B-Instruct/index.md (model card copy)",
        ),
    ),
    ModelConfig(
        hf_id="Qwen/Qwen2.5-32B-Instruct",
        family="qwen2",
        hidden_size=5120,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=64,
        intermediate_size=27648,
        vocab_size=152064,
        # The base Qwen2.5-32B config has 1e-5 (and slime's qwen2.5-32B.sh copies it); the Instruct
        # config has 1e-6, as the Instruct-specific copies below all show.
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=32.5,  # model card: "Number of Parameters: 32.5B"
        extra={
            "attention_bias": True,
            "use_sliding_window": False,
            "sliding_window": 131072,
            "max_window_layers": 70,  # larger than the 64 layers, as published
        },
        source="https://huggingface.co/Qwen/Qwen2.5-32B-Instruct/blob/main/config.json",
        verified_against=(
            "msshahzaib777/LLM_inference_Mac_cluster: models/qwen2.5-32b-instruct-bf16/config.json (mlx-community copy)",
            "https://github.com/vllm-project/vllm/issues/12328 (full config of a 32B Qwen2.5 Instruct checkpoint)",
            "mindspore-lab/mindformers: research/qwen2_5/predict_qwen2_5_32b_instruct.yaml",
            "NVIDIA-NeMo/Megatron-Bridge: src/megatron/bridge/models/qwen/qwen_provider.py (Qwen25ModelProvider32B)",
            "Hanson-Wang-chn/AI-Prof: LLM/README.md (model card copy)",
        ),
    ),
    ModelConfig(
        hf_id="Qwen/Qwen2.5-72B-Instruct",
        family="qwen2",
        hidden_size=8192,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=80,
        intermediate_size=29568,
        # MindStudio-ModelSlim's doc copy shows 150000 here, alone against every other copy (and
        # against the 152064-row embedding); taken as an edit in that doc.
        vocab_size=152064,
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=72.7,  # model card: "Number of Parameters: 72.7B"
        extra={
            "attention_bias": True,
            "use_sliding_window": False,
            "sliding_window": 131072,
            "max_window_layers": 70,
        },
        source="https://huggingface.co/Qwen/Qwen2.5-72B-Instruct/blob/main/config.json",
        verified_against=(
            "verylucky01/MindStudio-ModelSlim: docs/zh/feature_guide/scripts_based_quantization_and_other_features/"
            "pytorch/fa_quantization_usage.md (full config copy)",
            "mindspore-lab/mindformers: research/qwen2_5/predict_qwen2_5_72b_instruct.yaml",
            "NVIDIA-NeMo/Megatron-Bridge: src/megatron/bridge/models/qwen/qwen_provider.py (Qwen25ModelProvider72B)",
            "ZHUI/paddlenlp_model_readme: Qwen/Qwen2.5-72B-Instruct/index.md (model card copy)",
        ),
    ),
    ModelConfig(
        hf_id="Qwen/Qwen2.5-Coder-32B-Instruct",
        family="qwen2",
        hidden_size=5120,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=64,
        intermediate_size=27648,
        vocab_size=152064,
        # Unconfirmed: no copy of this Instruct config was found. litgpt's shared Coder-32B entry
        # (written from the base config) has 1e-5, but litgpt also has 1e-5 for Qwen2.5-32B, whose
        # Instruct config has 1e-6; the value here follows Qwen2.5-32B-Instruct.
        rms_norm_eps=1e-6,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=32768,  # model card: the config.json is set for 32,768 tokens
        rope_theta=1_000_000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        dtype="bfloat16",
        parameters_b=32.5,  # model card: "Number of Parameters: 32.5B"
        extra={
            "attention_bias": True,
            # Unconfirmed, as Qwen2.5-32B-Instruct (no copy of this config found); inert while
            # use_sliding_window is false.
            "use_sliding_window": False,
            "sliding_window": 131072,
            "max_window_layers": 70,
        },
        source="https://huggingface.co/Qwen/Qwen2.5-Coder-32B-Instruct/blob/main/config.json",
        verified_against=(
            "ZHUI/paddlenlp_model_readme: Qwen/Qwen2.5-Coder-32B-Instruct/index.md (model card copy)",
            "Lightning-AI/litgpt: litgpt/config.py (Qwen2.5-Coder-32B{} entry)",
            "https://github.com/ggml-org/llama.cpp/issues/10312 (GGUF metadata of Qwen2.5-Coder-32B-Instruct-AWQ)",
        ),
    ),
)
