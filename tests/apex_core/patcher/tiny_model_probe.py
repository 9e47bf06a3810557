"""Run by test_points in a child process: a tiny Llama-3.1, GPT-OSS, Qwen3.5 or Gemma 2 (``llama``,
``gpt-oss``, ``qwen3.5`` or ``gemma2``) in bfloat16 on the CPU, seeded, a batch of two prompts, then one decode
step from the cache. Saved: the logits and, for GPT-OSS, the experts each router picked (as sets,
best-first order aside) and how many tokens had a tie at the k-th largest logit (where the stack
and the solution may each pick another expert, both right). Printed: the patched adapters
installed and how many solution files the model really called (a profile hook on calls into the
``_apex_patch_*`` copies).

The shapes keep the real models' structure in a megabyte or two of weights. Llama-3.1: head dim
128, llama3 rope scaling. GPT-OSS: 32 experts, top 4, head dim 64, a sliding-window layer, a
hidden size that is not a power of two; one layer, because behind a second the solutions' single
fp32 rounding of the first layer's outputs (one bf16 step from the stack's) moves tokens whose
k-th and next logits are one or two bf16 steps apart to another expert. Qwen3.5: a DeltaNet layer
(key and value heads of 128, three value heads per key head) and a full-attention layer with
per-head q/k norms. GPT-OSS's and Qwen3.5's norm weights are drawn away from their initial values
(ones, and zeros for Qwen3.5's zero-centered 1 + w), so a solution that ignored the weight or its
offset would show. Gemma 2: two layers (one sliding-window, one full) whose MLP is the GeGLU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch


def llama() -> tuple[Any, dict[str, bool]]:
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama as modeling

    config = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=128, max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192})
    reached = {"rms_norm": hasattr(modeling.LlamaRMSNorm.forward, "__apex_solution__"),
               "rope": hasattr(modeling.apply_rotary_pos_emb, "__apex_solution__"),
               "silu_and_mul": hasattr(modeling.LlamaMLP.forward, "__apex_solution__")}
    return LlamaForCausalLM(config), reached


def gpt_oss() -> tuple[Any, dict[str, bool]]:
    from transformers import GptOssConfig, GptOssForCausalLM
    from transformers.models.gpt_oss import modeling_gpt_oss as modeling

    config = GptOssConfig(vocab_size=128, hidden_size=96, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
                          num_key_value_heads=1, head_dim=64, num_local_experts=32, num_experts_per_tok=4, sliding_window=4,
                          layer_types=["sliding_attention"], initializer_range=0.1)
    model = GptOssForCausalLM(config)
    for name, parameter in model.named_parameters():
        if name.endswith("norm.weight"):
            torch.nn.init.normal_(parameter, mean=1.0, std=0.3)
    reached = {"rms_norm": hasattr(modeling.GptOssRMSNorm.forward, "__apex_solution__"),
               "moe_router": hasattr(modeling.GptOssTopKRouter.forward, "__apex_solution__"),
               "swiglu_clamped": hasattr(modeling.GptOssExperts._apply_gate, "__apex_solution__")}
    return model, reached


def qwen3_5() -> tuple[Any, dict[str, bool]]:
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    from transformers.models.qwen3_5 import modeling_qwen3_5 as modeling

    config = Qwen3_5TextConfig(vocab_size=128, hidden_size=96, intermediate_size=80, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                               layer_types=["linear_attention", "full_attention"], linear_num_key_heads=1,
                               linear_num_value_heads=3, linear_key_head_dim=128, linear_value_head_dim=128,
                               linear_conv_kernel_dim=4, initializer_range=0.1, tie_word_embeddings=False)
    model = Qwen3_5ForCausalLM(config)
    for name, parameter in model.named_parameters():
        if name.endswith("layernorm.weight") or name.endswith("_norm.weight") or name == "model.norm.weight":
            torch.nn.init.normal_(parameter, mean=0.0, std=0.3)
    reached = {"rms_norm": hasattr(modeling.Qwen3_5RMSNorm.forward, "__apex_solution__"),
               "silu_and_mul": hasattr(modeling.Qwen3_5MLP.forward, "__apex_solution__"),
               "gated_delta_rule": hasattr(modeling.torch_chunk_gated_delta_rule, "__apex_solution__")}
    return model, reached


def gemma2() -> tuple[Any, dict[str, bool]]:
    from transformers import Gemma2Config, Gemma2ForCausalLM
    from transformers.models.gemma2 import modeling_gemma2 as modeling

    config = Gemma2Config(vocab_size=128, hidden_size=96, intermediate_size=80, num_hidden_layers=2, num_attention_heads=2,
                          num_key_value_heads=1, head_dim=64, query_pre_attn_scalar=64, sliding_window=4,
                          hidden_activation="gelu_pytorch_tanh", initializer_range=0.1)
    reached = {"gelu_tanh_and_mul": hasattr(modeling.Gemma2MLP.forward, "__apex_solution__")}
    return Gemma2ForCausalLM(config), reached


def main(which: str, out: str) -> None:
    torch.manual_seed(0)
    model, reached = {"llama": llama, "gpt-oss": gpt_oss, "qwen3.5": qwen3_5, "gemma2": gemma2}[which]()
    model = model.to(torch.bfloat16).eval()
    prompts = torch.randint(0, 128, (2, 7))
    routes: list[list[list[int]]] = []
    ties = 0

    def record_route(module: Any, args: Any, output: Any) -> None:
        nonlocal ties
        logits, _, ids = output
        routes.append([sorted(row) for row in ids.tolist()])
        ranked = logits.float().sort(dim=-1, descending=True).values
        ties += int((ranked[:, module.top_k - 1] == ranked[:, module.top_k]).sum())  # either expert is right

    for module in model.modules():
        if type(module).__name__ == "GptOssTopKRouter":
            module.register_forward_hook(record_route)
    called: set[str] = set()

    def hook(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call" and Path(frame.f_code.co_filename).name.startswith("_apex_patch_"):
            called.add(frame.f_code.co_filename)

    sys.setprofile(hook)
    with torch.no_grad():
        prefill = model(prompts, use_cache=True)
        step = model(prefill.logits[:, -1:].argmax(-1), past_key_values=prefill.past_key_values, use_cache=True)
    sys.setprofile(None)
    torch.save({"prefill": prefill.logits.float(), "decode": step.logits.float(), "routes": routes, "ties": ties}, out)
    print(" ".join(name for name, patched in reached.items() if patched), f"called={len(called)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
