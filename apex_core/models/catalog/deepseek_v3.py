"""DeepSeek-V3's architecture (MLA, sigmoid-routed MoE with a shared expert, grouped top-k)."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

_R1 = ModelConfig(
    hf_id="deepseek-ai/DeepSeek-R1",
    family="deepseek-v3",
    hidden_size=7168,
    num_attention_heads=128,
    num_key_value_heads=128,
    head_dim=192,  # qk_nope_head_dim + qk_rope_head_dim; v_head_dim is 128
    num_hidden_layers=61,
    intermediate_size=18432,
    vocab_size=129280,
    rms_norm_eps=1e-6,
    attention="mla",
    mlp="moe_shared",
    num_experts=256,
    experts_per_token=8,
    num_shared_experts=1,
    moe_intermediate_size=2048,
    router_scoring="sigmoid",
    max_position_embeddings=163840,
    rope_theta=10000.0,
    rope_scaling="yarn (factor 40, original 4096, beta_fast 32, beta_slow 1)",
    # The card's 671B total (37B active); the HF page's 685B adds the one MTP layer, which the
    # transformers model does not build.
    parameters_b=671.0,
    extra={
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        # rope_scaling.mscale_all_dim (the text above keeps the scaling's frequency numbers): YaRN's
        # attention factor 0.1 x mscale_all_dim x ln(factor) + 1, squared, scales MLA's softmax
        # (DeepSeek-V3 inference/model.py, MLA.__init__). 1.0 in R1's and V3's config.json and in
        # TimYangst/llm-tech-matrix's deepseek-v3.json.
        "mscale_all_dim": 1.0,
        "first_k_dense_replace": 3,
        "n_group": 8,
        "topk_group": 4,
        "routed_scaling_factor": 2.5,
        "topk_method": "noaux_tc",
        "weight_quantization": "fp8 e4m3, 128x128 blocks",
    },
    source="https://huggingface.co/deepseek-ai/DeepSeek-R1/blob/main/config.json",
    verified_against=(
        "huggingface/transformers: src/transformers/models/deepseek_v3/configuration_deepseek_v3.py",
        "https://ollama.com/library/deepseek-r1:671b/blobs/439dd1a5e052 (GGUF metadata)",
        "https://www.openrouter.ai/deepseek/deepseek-r1 (671B total, 37B active)",
    ),
)

_V3 = _R1.model_copy(update={
    # R1 is V3 post-trained: every architecture number, the extras and the count are R1's, each
    # checked again in V3's own copies below.
    "hf_id": "deepseek-ai/DeepSeek-V3",
    "source": "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
    "verified_against": (
        "TimYangst/llm-tech-matrix: data/extracted/deepseek-v3.json (from the raw config.json)",
        "AI-Hypercomputer/maxtext: src/maxtext/configs/models/deepseek3-671b.yml",
        "huggingface/transformers: src/transformers/models/deepseek_v3/configuration_deepseek_v3.py (defaults)",
        "deepseek-ai/DeepSeek-V3: README_WEIGHTS.md (fp8 quantization_config; 671B in the main model, the MTP module's 11.5B not built here)",
    ),
})

MODELS: tuple[ModelConfig, ...] = (
    _R1,
    _V3,
    ModelConfig(
        # Kimi K2 reuses DeepSeek-V3's architecture: architectures ["DeepseekV3ForCausalLM"], with
        # model_type "kimi_k2" only so engines can tell it apart; different sizes, same code.
        hf_id="moonshotai/Kimi-K2-Thinking",
        family="deepseek-v3",
        hidden_size=7168,
        num_attention_heads=64,
        num_key_value_heads=64,
        head_dim=192,  # qk_nope_head_dim + qk_rope_head_dim; v_head_dim is 128
        num_hidden_layers=61,
        intermediate_size=18432,
        vocab_size=163840,
        # 1e-5 here; Kimi-K2-Base/Instruct configs use 1e-6
        rms_norm_eps=1e-5,
        attention="mla",
        mlp="moe_shared",
        num_experts=384,
        experts_per_token=8,
        num_shared_experts=1,
        moe_intermediate_size=2048,
        router_scoring="sigmoid",
        max_position_embeddings=262144,
        rope_theta=50000.0,
        # beta_fast 1 (not DeepSeek's 32); K2-Instruct's first release had factor 32 and 131072
        rope_scaling="yarn (factor 64, original 4096, beta_fast 1, beta_slow 1)",
        # The card rounds to "1T total, 32B activated"; the K2 technical report (arXiv 2507.20534)
        # states 1.04 trillion, as https://agentwiki.org/moonshot_kimi_k2 quotes it.
        parameters_b=1040.0,
        extra={
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            # rope_scaling.mscale_all_dim, which scales the softmax as DeepSeek's does (see R1):
            # 1.0 in the config.json and in TimYangst/llm-tech-matrix's kimi-k2-thinking.json.
            "mscale_all_dim": 1.0,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "routed_scaling_factor": 2.827,
            "topk_method": "noaux_tc",
            # quantization_config: compressed-tensors "pack-quantized", int, num_bits 4, symmetric,
            # strategy "group"; ignore covers lm_head, self_attn, shared_experts and the dense mlp
            "weight_quantization": "int4 symmetric, group size 32, routed experts only (bf16 elsewhere)",
        },
        source="https://huggingface.co/moonshotai/Kimi-K2-Thinking/blob/main/config.json",
        verified_against=(
            "TimYangst/llm-tech-matrix: data/extracted/kimi-k2-thinking.json (from the raw config.json)",
            "https://huggingface.co/RedHatAI/Kimi-K2-Thinking-FP8-Block/blob/main/config.json (requantized copy)",
            "zyzshishui/slime: scripts/models/kimi-k2-thinking.sh (Megatron args)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/kimi-k2-1t.yml (K2 sibling: shared sizes)",
        ),
    ),
)
