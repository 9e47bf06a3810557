"""Hugging Face transformers configurations built from the model registry, and the models they make.

Each registry family maps to the transformers configuration class of its architecture; the real
hidden sizes, heads, experts, vocabulary and rope settings come from the registry entry, only the
depth may be reduced (``WorkloadSpec.layers``; "full" is the registry's own). ``AutoModelForCausalLM.from_config`` then builds the
model with random weights from a fixed seed: nothing is downloaded.

``cpu-mini`` is a Llama of our own at the registry's cpu-mini width (hidden 1024, eps 1e-6): a few
MB in float32, whose RMSNorm layers call the cpu-mini__rms_norm task's entry point
(``cpu_mini.TaskRMSNorm``).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import ModelConfig, get_model
from apex_core.workloads.spec import WorkloadSpec, resolved_layers

TRANSFORMERS_PIN = "transformers>=5.17,<6"

CONFIG_CLASSES: dict[str, tuple[str, ...]] = {
    "synthetic": ("LlamaConfig",),
    "llama3": ("LlamaConfig",),
    # Qwen3.5's text model; the checkpoint's own Qwen3_5Config wraps it with a vision tower.
    "qwen3.5": ("Qwen3_5TextConfig",),
    "gpt-oss": ("GptOssConfig",),
    "deepseek-v3": ("DeepseekV3Config",),
}
"""Registry family -> transformers configuration class (first that the installed version has)."""

CPU_MINI_SHAPE = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256,
                  "vocab_size": 512, "max_position_embeddings": 1024}
"""cpu-mini's numbers beyond the registry's (which has only the norm's width and eps): small
enough for a few MB of float32 weights."""


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise ApexUserError(f"the transformers stack needs Hugging Face transformers; install it: pip install '{TRANSFORMERS_PIN}'") from None
    return transformers


def config_class(model: ModelConfig) -> type:
    """The transformers configuration class for a registry model; one clear line when missing."""
    transformers = transformers_module()
    names = CONFIG_CLASSES.get(model.family)
    if names is None:
        raise ApexUserError(f"model {model.slug} (family {model.family}) has no transformers configuration mapped; "
                            f"mapped families: {', '.join(sorted(CONFIG_CLASSES))}")
    for name in names:
        found = getattr(transformers, name, None)
        if found is not None:
            return found
    raise ApexUserError(f"transformers {transformers.__version__} has no {' or '.join(names)} for {model.slug}; "
                        f"install a version that has it: pip install '{TRANSFORMERS_PIN}'")


def rope_parameters(model: ModelConfig) -> dict[str, Any]:
    """transformers' ``rope_parameters`` from the registry's theta and scaling text, e.g.
    'llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, original 8192)'."""
    parameters: dict[str, Any] = {"rope_type": "default", "rope_theta": model.rope_theta or 10000.0}
    match = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", model.rope_scaling)
    if match and match.group(1) != "none":
        parameters["rope_type"] = match.group(1)
        for item in (match.group(2) or "").split(","):
            words = item.split()
            if len(words) != 2:
                continue
            key, value = words
            if key == "original":
                parameters["original_max_position_embeddings"] = int(value)
            else:
                parameters[key] = float(value)
    if "partial_rotary_factor" in model.extra:
        parameters["partial_rotary_factor"] = float(model.extra["partial_rotary_factor"])  # type: ignore[arg-type]
    return parameters


def _layer_types(model: ModelConfig, layers: int) -> list[str]:
    pattern = [str(kind) for kind in model.extra["layer_pattern"]]  # type: ignore[union-attr]
    return [pattern[i % len(pattern)] for i in range(layers)]


def config_kwargs(model: ModelConfig, layers: int) -> dict[str, Any]:
    """The keyword arguments of the model's transformers configuration, from the registry."""
    common = {
        "vocab_size": model.vocab_size,
        "hidden_size": model.hidden_size,
        "intermediate_size": model.intermediate_size,
        "num_hidden_layers": layers,
        "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": model.num_key_value_heads,
        "rms_norm_eps": model.rms_norm_eps,
        "max_position_embeddings": model.max_position_embeddings,
        "rope_parameters": rope_parameters(model),
        "tie_word_embeddings": False,
    }
    family = model.family
    if family == "synthetic":
        return {**common, **CPU_MINI_SHAPE, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
                "tie_word_embeddings": True}
    if family == "llama3":
        return {**common, "head_dim": model.head_dim}
    if family == "qwen3.5":
        extra = model.extra
        return {
            **common,
            "head_dim": model.head_dim,
            "layer_types": _layer_types(model, layers),
            "linear_num_key_heads": extra["linear_num_key_heads"],
            "linear_num_value_heads": extra["linear_num_value_heads"],
            "linear_key_head_dim": extra["linear_key_head_dim"],
            "linear_value_head_dim": extra["linear_value_head_dim"],
            "linear_conv_kernel_dim": extra["linear_conv_kernel_dim"],
        }
    if family == "gpt-oss":
        extra = model.extra
        return {
            **common,
            "head_dim": model.head_dim,
            "num_local_experts": model.num_experts,
            "num_experts_per_tok": model.experts_per_token,
            "sliding_window": extra["sliding_window"],
            "layer_types": _layer_types(model, layers),
            "attention_bias": bool(extra.get("attention_bias", True)),
            "swiglu_limit": extra["swiglu_limit"],
            "swiglu_alpha": extra["swiglu_alpha"],
        }
    if family == "deepseek-v3":
        extra = model.extra
        return {
            **common,
            "moe_intermediate_size": model.moe_intermediate_size,
            "n_routed_experts": model.num_experts,
            "n_shared_experts": model.num_shared_experts,
            "num_experts_per_tok": model.experts_per_token,
            "routed_scaling_factor": extra["routed_scaling_factor"],
            "kv_lora_rank": extra["kv_lora_rank"],
            "q_lora_rank": extra["q_lora_rank"],
            "qk_rope_head_dim": extra["qk_rope_head_dim"],
            "qk_nope_head_dim": extra["qk_nope_head_dim"],
            "v_head_dim": extra["v_head_dim"],
            "n_group": extra["n_group"],
            "topk_group": extra["topk_group"],
            # The real model's first 3 layers are dense; a reduced one keeps at least one MoE layer.
            "first_k_dense_replace": min(int(extra["first_k_dense_replace"]), layers - 1),  # type: ignore[arg-type]
            "norm_topk_prob": True,
        }
    raise ApexUserError(f"model {model.slug}: family {family} has no transformers configuration mapped")


def hf_config(spec: WorkloadSpec) -> Any:
    """The transformers configuration of a (resolved) workload."""
    model = get_model(spec.model)
    layers = resolved_layers(spec)
    cls = config_class(model)
    config = cls(**config_kwargs(model, layers))
    config.use_cache = True
    return config


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def build_model(spec: WorkloadSpec, device: str | None = None) -> Any:
    """The workload's model with random weights drawn from ``spec.seed``, in eval mode.

    ``device`` overrides the spec's (``"meta"`` builds the structure without allocating weights).
    The model is built directly on its device, so a GPU draws its own weights.
    """
    import torch

    transformers = transformers_module()
    config = hf_config(spec)
    target = device or spec.device
    torch.manual_seed(spec.seed)
    if target.startswith("cuda"):
        torch.cuda.manual_seed_all(spec.seed)
    with torch.device(target):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch_dtype(spec.dtype))
    model.eval()
    if spec.model == "cpu-mini" and target != "meta":
        from apex_core.workloads.cpu_mini import install_task_layers

        install_task_layers(model)
    return model


def modeling_module(model: Any) -> Any:
    """The transformers modeling module that defines ``model``'s class."""
    return importlib.import_module(type(model).__module__)
