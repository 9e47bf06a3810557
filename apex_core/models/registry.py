"""Published model configurations, each with where its numbers come from.

Task shapes (hidden size, head counts, expert counts) are derived from these entries instead of
being typed into each task, so a wrong number here is wrong once and fixed once. Every real entry
names the model's Hugging Face ``config.json`` and the independent copies its numbers were checked
against (research of 2026-11-29; the raw Hugging Face files were not reachable from our machines,
so each value was confirmed in at least two matching copies, named in ``verified_against``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from apex_core.errors import UnknownNameError

AttentionKind = Literal["mha", "gqa", "mla", "hybrid_gqa_gated_deltanet", "none"]
MlpKind = Literal["swiglu", "moe", "moe_shared", "none"]


class ModelConfig(BaseModel):
    """Architecture numbers of one model, as its config.json states them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_id: str
    family: str
    synthetic: bool = False
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(ge=0)
    num_key_value_heads: int = Field(ge=0)
    head_dim: int = Field(ge=0)
    num_hidden_layers: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    rms_norm_eps: float = Field(gt=0)
    attention: AttentionKind
    mlp: MlpKind
    num_experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    num_shared_experts: int = Field(default=0, ge=0)
    moe_intermediate_size: int = Field(default=0, ge=0)
    router_scoring: Literal["softmax", "sigmoid", "none"] = "none"
    max_position_embeddings: int = Field(default=0, ge=0)
    rope_theta: float = Field(default=0.0, ge=0)
    rope_scaling: str = "none"
    dtype: str = "bfloat16"
    extra: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    """Architecture-specific keys (MLA ranks, sliding windows, linear-attention heads, ...)."""
    source: str
    verified_against: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfig:
        if self.mlp in ("moe", "moe_shared"):
            if self.num_experts <= 0 or not 0 < self.experts_per_token <= self.num_experts:
                raise ValueError(f"{self.hf_id}: a MoE model needs num_experts > 0 and 0 < top-k <= experts")
        elif self.num_experts or self.experts_per_token:
            raise ValueError(f"{self.hf_id}: a dense model has no experts")
        if self.num_key_value_heads and self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.hf_id}: attention heads must be a multiple of kv heads")
        if not self.synthetic and not self.verified_against:
            raise ValueError(f"{self.hf_id}: a real model needs the copies its numbers were checked against")
        return self

    @property
    def slug(self) -> str:
        return model_slug(self.hf_id)


def model_slug(hf_id: str) -> str:
    """The task-id form of a model id: the name after the org, lower case, '.' and '_' as '-'."""
    tail = hf_id.rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9]+", "-", tail.lower()).strip("-")


_MODELS: tuple[ModelConfig, ...] = (
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
        source="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        verified_against=(
            "https://huggingface.co/vtriple/Llama-3.1-8B-yara/blob/main/config.json (byte copy of the Instruct config)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/llama3.1-8b.yml",
        ),
    ),
    ModelConfig(
        hf_id="Qwen/Qwen3.5-27B",
        family="qwen3.5",
        hidden_size=5120,
        num_attention_heads=24,
        num_key_value_heads=4,
        head_dim=256,  # explicit in the config, not hidden_size / heads
        num_hidden_layers=64,
        intermediate_size=17408,
        vocab_size=248320,
        rms_norm_eps=1e-6,
        attention="hybrid_gqa_gated_deltanet",
        mlp="swiglu",
        max_position_embeddings=262144,
        rope_theta=10_000_000.0,
        rope_scaling="none (mrope, partial_rotary_factor 0.25)",
        extra={
            "full_attention_interval": 4,
            "layer_pattern": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 48,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "attn_output_gate": True,
            "partial_rotary_factor": 0.25,
            "rms_norm_zero_centered": True,
        },
        source="https://huggingface.co/Qwen/Qwen3.5-27B/blob/main/config.json (text_config)",
        verified_against=(
            "https://huggingface.co/Qwen/Qwen3.5-27B/commit/3b2962802c141fcffb992b4e13e4cf9012fdaa13 (model card)",
            "THUDM/slime: scripts/models/qwen3.5-27B.sh",
            "https://raw.githubusercontent.com/vllm-project/recipes/main/models/Qwen/Qwen3.5-27B.yaml",
        ),
    ),
    ModelConfig(
        hf_id="openai/gpt-oss-20b",
        family="gpt-oss",
        hidden_size=2880,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_hidden_layers=24,
        intermediate_size=2880,
        vocab_size=201088,
        rms_norm_eps=1e-5,
        attention="gqa",
        mlp="moe",
        num_experts=32,
        experts_per_token=4,
        moe_intermediate_size=2880,
        router_scoring="softmax",  # softmax over the top-4 router logits
        max_position_embeddings=131072,
        rope_theta=150000.0,
        rope_scaling="yarn (factor 32, beta_fast 32, beta_slow 1, original 4096)",
        extra={
            "sliding_window": 128,
            "layer_pattern": ["sliding_attention", "full_attention"],
            "attention_sinks": True,
            "attention_bias": True,
            "swiglu_limit": 7.0,
            "swiglu_alpha": 1.702,
            "expert_quantization": "mxfp4",
        },
        source="https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json",
        verified_against=(
            "jihengzhang/jihz-gpt-oss-20b: gpt-oss-20b/config.json (mirror)",
            "AI-Hypercomputer/maxtext: src/maxtext/configs/models/gpt-oss-20b.yml",
            "openai/gpt-oss: gpt_oss/torch/model.py (reference implementation)",
        ),
    ),
    ModelConfig(
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
        extra={
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
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
        ),
    ),
)

MODELS: dict[str, ModelConfig] = {m.slug: m for m in _MODELS}


def get_model(name: str) -> ModelConfig:
    """Look a model up by slug (``llama-3-1-8b-instruct``) or Hugging Face id."""
    if name in MODELS:
        return MODELS[name]
    slug = model_slug(name)
    if slug in MODELS:
        return MODELS[slug]
    raise UnknownNameError("model", name, MODELS)
