"""Microsoft's Phi-3 architecture (dense, fused qkv and gate_up projections, SwiGLU), used by Phi-3.5 and phi-4."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

# Phi3 stores the MLP's gate and up projections as one fused gate_up_proj weight (and q, k, v as one
# qkv_proj); the computation is still SwiGLU, so mlp is "swiglu".

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="microsoft/Phi-3.5-mini-instruct",
        family="phi3",
        hidden_size=3072,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=96,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=32,
        intermediate_size=8192,
        vocab_size=32064,
        rms_norm_eps=1e-5,
        attention="mha",
        mlp="swiglu",
        max_position_embeddings=131072,
        rope_theta=10000.0,
        rope_scaling="longrope (original 4096)",
        tie_word_embeddings=False,
        # The card says 3.8B; the HF page's safetensors count is 3.82B (3,821,079,552 for this shape).
        parameters_b=3.82,
        extra={
            # one factor per rotary frequency pair (head_dim / 2 = 48 each), as the config lists them
            "rope_long_factor": [
                1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
                1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
                3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
                7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
                24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
                32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
                50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
                58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
                62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
                63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
                64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
                64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062,
            ],
            "rope_short_factor": [
                1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705,
                1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
                1.0499999523162842, 1.0699999332427979, 1.0999999046325684, 1.1099998950958252,
                1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
                1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083,
                1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903,
                1.9899996519088745, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
                2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0299997329711914,
                2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
                2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
                2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713,
                2.5899994373321533, 2.729999542236328, 2.749999523162842, 2.8399994373321533,
            ],
            # larger than max_position_embeddings, so no window ever applies
            "sliding_window": 262144,
        },
        source="https://huggingface.co/microsoft/Phi-3.5-mini-instruct/blob/main/config.json",
        verified_against=(
            "sdpython/experimental-experiment: _doc/recipes/plot_exporter_exporter_phi35_piece.py (full config)",
            "NVIDIA/Fuser: benchmarks/python/rope_ops.py, earlier revision (hf_phi3_rope embeds the config.json)",
            "https://huggingface.co/twelcone/pii-phi/blob/main/config.json (fine-tune carrying the base config)",
            "Azure/azureml-assets: assets/models/system/phi-3.5-mini-128k-instruct/description.md (3.8B)",
            "keras-team/keras-hub: keras_hub/src/models/phi3/phi3_presets.py (3821079552, same shape)",
        ),
    ),
    ModelConfig(
        # architectures ["Phi3ForCausalLM"], model_type "phi3": phi-4 reuses the Phi-3 architecture
        hf_id="microsoft/phi-4",
        family="phi3",
        hidden_size=5120,
        num_attention_heads=40,
        num_key_value_heads=10,
        head_dim=128,  # not a key in the config: hidden_size / num_attention_heads
        num_hidden_layers=40,
        intermediate_size=17920,
        vocab_size=100352,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="swiglu",
        max_position_embeddings=16384,  # original_max_position_embeddings is also 16384
        rope_theta=250000.0,
        rope_scaling="none",
        tie_word_embeddings=False,
        # The card says 14B; the HF page and Ollama's phi4 page give 14.7B.
        parameters_b=14.7,
        extra={
            # null in the published config and its copies; one GitHub mirror has 16384 (= the context
            # length, so no windowing either way)
            "sliding_window": None,
        },
        source="https://huggingface.co/microsoft/phi-4/blob/main/config.json",
        verified_against=(
            "https://huggingface.co/microsoft/phi-4/blob/refs%2Fpr%2F10/config.json (copy on a PR branch)",
            "https://huggingface.co/stelterlab/phi-4-AWQ/blob/main/config.json (AWQ of the microsoft/phi-4 snapshot)",
            "mehmetcc/pal: phi-4/config.json (mirror)",
            "pytorch/torchtune: torchtune/models/phi4/_model_builders.py (phi4_14b)",
            "https://ollama.com/library/phi4:14b-fp16 (14.7B)",
        ),
    ),
)
