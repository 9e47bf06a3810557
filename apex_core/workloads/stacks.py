"""Kernel stacks from PyPI that put Triton code into site-packages, applied on request.

- ``liger``: Liger-Kernel's ``apply_liger_kernel_to_<model>`` (RMSNorm, RoPE, SwiGLU, ... as Triton
  kernels in ``liger_kernel/ops/``), applied to the built model instance. Its patches of module
  functions (RoPE) are process-wide: a later model of the same family in this process gets them
  too, so a run without Liger after one with it is refused (use a fresh process).
- ``fla``: flash-linear-attention, whose Triton ``chunk_gated_delta_rule`` transformers picks for
  Qwen3.5's gated-delta-net layers when the package is importable at the moment transformers'
  Qwen3.5 modeling module is imported; without it transformers runs its PyTorch fallback. A
  workload without ``fla`` hides the package during that import, so both variants are measurable
  (each in a fresh process: the choice is fixed once the module is imported).

Both need a GPU (Triton), and a clear one-line error says so on the CPU, or when not installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import sys
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import ModelConfig

EXTRAS = {
    "liger": ("liger-kernel", "liger_kernel", "liger-kernel==0.8.5"),
    "fla": ("flash-linear-attention", "fla", "flash-linear-attention==0.6.0"),
}
"""Stack -> (distribution, import name, the pin in pyproject.toml's extras)."""

LIGER_FUNCTIONS = {
    "llama3": "apply_liger_kernel_to_llama",
    "mistral": "apply_liger_kernel_to_mistral",
    "mixtral": "apply_liger_kernel_to_mixtral",
    "qwen2": "apply_liger_kernel_to_qwen2",
    "gemma2": "apply_liger_kernel_to_gemma2",
    "phi3": "apply_liger_kernel_to_phi3",
    "qwen3.5": "apply_liger_kernel_to_qwen3_5",
    "qwen3.5-moe": "apply_liger_kernel_to_qwen3_5_moe",
    "gpt-oss": "apply_liger_kernel_to_gpt_oss",
    "deepseek-v3": "apply_liger_kernel_to_deepseek_v3",
}
"""Registry family -> Liger's function for it (liger_kernel.transformers 0.8.5 has each; it has
none for the original Falcon, only for Falcon-H1)."""

QWEN3_5_MODELING = "transformers.models.qwen3_5.modeling_qwen3_5"
FLA_MODELING = {"qwen3.5": QWEN3_5_MODELING, "qwen3.5-moe": "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe"}
"""Family -> transformers' modeling module whose gated delta rule resolves to fla when importable."""
FLA_FAMILIES = tuple(FLA_MODELING)
"""Families with layers that flash-linear-attention runs (gated delta rule)."""

_liger_applied: set[str] = set()


def installed_version(stack: str) -> str | None:
    distribution = EXTRAS[stack][0]
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_stacks(kernels: tuple[str, ...], model: ModelConfig, on_gpu: bool) -> None:
    """Refuse, in one line, a kernel stack this machine or model cannot run."""
    for stack in kernels:
        distribution, _, pin = EXTRAS[stack]
        if not on_gpu:
            raise ApexUserError(f"--kernels {stack}: {distribution}'s Triton kernels need a GPU and this workload runs on the CPU; "
                                f"leave out --kernels {stack}, or run on a GPU")
        if installed_version(stack) is None:
            raise ApexUserError(f"--kernels {stack}: {distribution} is not installed; pip install '{pin}' "
                                f"(or pip install 'apex-kernels[{stack}]')")
        if stack == "liger" and model.family not in LIGER_FUNCTIONS:
            raise ApexUserError(f"--kernels liger: Liger-Kernel has no patch for {model.slug}; it applies to "
                                f"{', '.join(sorted(LIGER_FUNCTIONS))} models")
        if stack == "fla" and model.family not in FLA_FAMILIES:
            raise ApexUserError(f"--kernels fla: {model.slug} has no linear-attention layers for flash-linear-attention; "
                                "it applies to Qwen3.5 (qwen3-5-27b, qwen3-5-35b-a3b)")
    if "liger" not in kernels and model.family in _liger_applied:
        raise ApexUserError(f"Liger-Kernel was applied to a {model.family} model earlier in this process and its patches "
                            "stay; benchmark without --kernels liger in a fresh process")


def prepare_imports(kernels: tuple[str, ...], model: ModelConfig) -> list[str]:
    """Before the model is built: import transformers' Qwen3.5 modeling with or without fla, as asked.

    Returns notes on what was done. Refuses when the module is already imported the other way.
    """
    if model.family not in FLA_FAMILIES:
        return []
    want = "fla" in kernels
    modeling = FLA_MODELING[model.family]
    if modeling in sys.modules:
        active = fla_active(sys.modules[modeling])
        if active is not None and active != want:
            state = "with" if active else "without"
            raise ApexUserError(f"transformers' Qwen3.5 code was imported {state} flash-linear-attention earlier in this "
                                f"process; benchmark {'with' if want else 'without'} --kernels fla in a fresh process")
        return []
    if want:
        importlib.import_module(modeling)
        return ["flash-linear-attention's chunk_gated_delta_rule for the gated-delta-net layers"]
    hidden = {name: sys.modules[name] for name in list(sys.modules) if name == "fla" or name.startswith("fla.")}
    for name in hidden:
        del sys.modules[name]
    sys.modules["fla"] = None  # type: ignore[assignment]  # 'import fla' fails: transformers' PyTorch fallback
    try:
        importlib.import_module(modeling)
    finally:
        del sys.modules["fla"]
        sys.modules.update(hidden)
    return ["gated delta rule: transformers' PyTorch fallback (flash-linear-attention hidden)"] if installed_version("fla") else []


def fla_active(module: Any) -> bool | None:
    """Whether the Qwen3.5 modeling module's gated delta rule resolved to fla (None: cannot tell)."""
    function = getattr(module, "torch_chunk_gated_delta_rule", None)
    if function is None:
        return None
    for cell in _closure_cells(function):
        if callable(cell) and getattr(cell, "__module__", "").startswith("fla"):
            return True
    return False


def _closure_cells(function: Any, depth: int = 3) -> list[Any]:
    found: list[Any] = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        found.append(value)
        if depth and callable(value) and getattr(value, "__closure__", None):
            found.extend(_closure_cells(value, depth - 1))
    wrapped = getattr(function, "__wrapped__", None)
    if wrapped is not None and depth:
        found.extend(_closure_cells(wrapped, depth - 1))
    return found


def apply_stacks(model: Any, kernels: tuple[str, ...], config: ModelConfig) -> list[str]:
    """After the model is built: apply Liger to it. Returns notes on what was applied."""
    notes: list[str] = []
    if "liger" in kernels:
        function_name = LIGER_FUNCTIONS[config.family]
        liger = importlib.import_module("liger_kernel.transformers")
        apply = getattr(liger, function_name, None)
        if apply is None:
            raise ApexUserError(f"--kernels liger: liger-kernel {installed_version('liger')} has no {function_name}; "
                                f"pip install '{EXTRAS['liger'][2]}'")
        wanted = {"model": model, "cross_entropy": False, "fused_linear_cross_entropy": False}
        accepted = inspect.signature(apply).parameters
        apply(**{k: v for k, v in wanted.items() if k in accepted})
        _liger_applied.add(config.family)
        notes.append(f"liger_kernel.transformers.{function_name}")
    if "fla" in kernels:
        module = sys.modules.get(FLA_MODELING.get(config.family, ""))
        if module is not None and fla_active(module) is False:
            raise ApexUserError("--kernels fla: transformers did not pick up flash-linear-attention's gated delta rule "
                                f"(fla {installed_version('fla')}); check that 'import fla' works")
    return notes
