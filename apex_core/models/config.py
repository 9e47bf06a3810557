"""What a registry entry holds: one model's architecture numbers, with where they come from.

Task shapes (hidden size, head counts, expert counts) and workloads are derived from these
entries instead of being typed again, so a wrong number here is wrong once and fixed once. Every
real entry names the model's Hugging Face ``config.json`` and the independent copies its numbers
were checked against (the raw Hugging Face files are not reachable from our machines, so each
value is confirmed in at least two matching copies, named in ``verified_against``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AttentionKind = Literal["mha", "gqa", "mqa", "mla", "hybrid_gqa_gated_deltanet", "none"]
MlpKind = Literal["swiglu", "geglu", "gelu", "moe", "moe_shared", "none"]
"""swiglu / geglu: gated MLPs (SiLU or tanh-GELU gate); gelu: an ungated MLP (Falcon);
moe_shared: routed experts plus always-on shared ones (DeepSeek-V3, Kimi K2)."""
NormKind = Literal["rms", "layer"]


class ModelConfig(BaseModel):
    """Architecture numbers of one model, as its config.json states them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_id: str
    family: str
    """The architecture family (a module of ``apex_core.models.catalog``), which picks the
    transformers configuration class; a model built on another's architecture (a distillation,
    a fine-tune) has that architecture's family."""
    synthetic: bool = False
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(ge=0)
    num_key_value_heads: int = Field(ge=0)
    head_dim: int = Field(ge=0)
    num_hidden_layers: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    rms_norm_eps: float = Field(gt=0)
    """The normalization's epsilon (``layer_norm_epsilon`` for a LayerNorm model)."""
    norm: NormKind = "rms"
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
    tie_word_embeddings: bool = False
    dtype: str = "bfloat16"
    parameters_b: float = Field(default=0.0, ge=0)
    """Total parameters in billions as the model card states it (0: not stated); a test builds the
    model from this entry on the meta device and compares, which catches a wrong number."""
    extra: dict[str, int | float | str | bool | list[str] | list[float] | None] = Field(default_factory=dict)
    """Architecture-specific keys (MLA ranks, sliding windows, soft-capping, linear-attention heads, ...)."""
    source: str
    verified_against: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfig:
        if self.mlp in ("moe", "moe_shared"):
            if self.num_experts <= 0 or not 0 < self.experts_per_token <= self.num_experts:
                raise ValueError(f"{self.hf_id}: a MoE model needs num_experts > 0 and 0 < top-k <= experts")
        elif self.num_experts or self.experts_per_token:
            raise ValueError(f"{self.hf_id}: a dense model has no experts")
        if self.mlp == "moe_shared" and self.num_shared_experts <= 0:
            raise ValueError(f"{self.hf_id}: mlp moe_shared needs num_shared_experts > 0")
        if self.num_key_value_heads and self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.hf_id}: attention heads must be a multiple of kv heads")
        if self.attention == "mqa" and self.num_key_value_heads != 1:
            raise ValueError(f"{self.hf_id}: multi-query attention has one kv head, not {self.num_key_value_heads}")
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
