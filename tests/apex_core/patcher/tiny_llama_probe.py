"""Run by test_points in a child process: a tiny Llama-3.1-shaped model (head dim 128, llama3 rope
scaling) in bfloat16 on the CPU, seeded, a batch of two prompts, then one decode step from the KV
cache; the logits are saved, and the patched adapters installed and the solution files the model
really called (a profile hook on calls into the ``_apex_patch_*`` copies) are printed."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama


def main(out: str) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=128, max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192})
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    prompts = torch.randint(0, 128, (2, 7))
    called: set[str] = set()

    def hook(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call" and Path(frame.f_code.co_filename).name.startswith("_apex_patch_"):
            called.add(frame.f_code.co_filename)

    sys.setprofile(hook)
    with torch.no_grad():
        prefill = model(prompts, use_cache=True)
        step = model(prefill.logits[:, -1:].argmax(-1), past_key_values=prefill.past_key_values, use_cache=True)
    sys.setprofile(None)
    torch.save({"prefill": prefill.logits.float(), "decode": step.logits.float()}, out)
    reached = {"rms_norm": hasattr(modeling_llama.LlamaRMSNorm.forward, "__apex_solution__"),
               "rope": hasattr(modeling_llama.apply_rotary_pos_emb, "__apex_solution__"),
               "silu_and_mul": hasattr(modeling_llama.LlamaMLP.forward, "__apex_solution__")}
    print(" ".join(name for name, patched in reached.items() if patched), f"called={len(called)}")


if __name__ == "__main__":
    main(sys.argv[1])
