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
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import ModelConfig, get_model
from apex_core.workloads.families import FAMILIES, family_kwargs
from apex_core.workloads.spec import WorkloadSpec, resolved_layers

TRANSFORMERS_PIN = "transformers>=5.17,<6"


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise ApexUserError(f"the transformers stack needs Hugging Face transformers; install it: pip install '{TRANSFORMERS_PIN}'") from None
    return transformers


def config_class(model: ModelConfig) -> type:
    """The transformers configuration class for a registry model; one clear line when missing."""
    transformers = transformers_module()
    family = FAMILIES.get(model.family)
    if family is None:
        raise ApexUserError(f"model {model.slug} (family {model.family}) has no transformers configuration mapped; "
                            f"mapped families: {', '.join(sorted(FAMILIES))}")
    names = family.config_classes
    for name in names:
        found = getattr(transformers, name, None)
        if found is not None:
            return found
    raise ApexUserError(f"transformers {transformers.__version__} has no {' or '.join(names)} for {model.slug}; "
                        f"install a version that has it: pip install '{TRANSFORMERS_PIN}'")


def hf_config(spec: WorkloadSpec) -> Any:
    """The transformers configuration of a (resolved) workload."""
    model = get_model(spec.model)
    layers = resolved_layers(spec)
    cls = config_class(model)
    config = cls(**family_kwargs(model, layers))
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
