"""The models Apex knows, one module per architecture family, in the order they are listed."""

from __future__ import annotations

from apex_core.models.catalog import deepseek_v3, falcon, gemma2, gpt_oss, llama3, mistral, mixtral, phi3, qwen2, qwen3_5, synthetic
from apex_core.models.config import ModelConfig

CATALOGUE: tuple[ModelConfig, ...] = (
    *synthetic.MODELS,
    *llama3.MODELS,
    *mistral.MODELS,
    *mixtral.MODELS,
    *qwen2.MODELS,
    *gemma2.MODELS,
    *phi3.MODELS,
    *falcon.MODELS,
    *deepseek_v3.MODELS,
    *gpt_oss.MODELS,
    *qwen3_5.MODELS,
)
