"""Stand-in models of our own, for machines without a GPU."""

from __future__ import annotations

from apex_core.models.config import ModelConfig

MODELS: tuple[ModelConfig, ...] = (
    ModelConfig(
        hf_id="apex/cpu-mini",
        family="synthetic",
        synthetic=True,
        hidden_size=1024,
        num_attention_heads=0,
        num_key_value_heads=0,
        head_dim=0,
        num_hidden_layers=1,
        intermediate_size=1024,
        vocab_size=1,
        rms_norm_eps=1e-6,
        attention="none",
        mlp="none",
        dtype="float32",
        source="synthetic: the CPU mini-evaluation's stand-in model (one RMSNorm layer, float32)",
    ),
)
