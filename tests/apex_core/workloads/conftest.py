"""What the workload tests share: real transformers models of each family, small enough for the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

def _tiny(family: str) -> Any:
    """A real transformers model of the family at a few thousand parameters, float32, random weights."""
    import transformers

    common = {"vocab_size": 97, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "tie_word_embeddings": False}
    if family == "llama":
        config = transformers.LlamaConfig(num_hidden_layers=2, **common)
    elif family == "qwen3.5":
        config = transformers.Qwen3_5TextConfig(
            num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"], linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, **common)
    elif family == "gpt-oss":  # a window of 8 that the 12-token prompt overflows
        config = transformers.GptOssConfig(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                                           sliding_window=8, num_local_experts=4, num_experts_per_tok=2, **common)
    else:  # deepseek-v3: MLA, one dense and one MoE layer; as many KV heads as heads, like R1
        mla = {k: v for k, v in common.items() if k != "head_dim"} | {"num_key_value_heads": 4}
        config = transformers.DeepseekV3Config(
            num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            n_shared_experts=1, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
            n_group=1, topk_group=1, **mla)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


@pytest.fixture
def tiny_model() -> Callable[[str], Any]:
    """``tiny_model(family)``: a fresh model of the family, the same weights every call (seed 0)."""
    return _tiny
