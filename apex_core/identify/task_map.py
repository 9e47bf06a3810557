"""Which of our tasks a kernel is: its kind, the workload's model and its dtype, through the catalogue.

Reads only the catalogue's public API (``all_tasks``; Task.id, models, kernel, dtype, language), so
the catalogue can change its files freely. A task's ``kernel`` may be the kind itself
(``rms_norm``), the kind with a language suffix (``rms_norm_hip``) or a variant of the kind
(``per_token_quant_fp8`` for fp8_quant); all three map back to the kind here.
"""

from __future__ import annotations

from apex_core.errors import ApexUserError
from apex_core.identify.kinds import KERNEL_KINDS, OTHER
from apex_core.tasks import all_tasks

KIND_VARIANTS: dict[str, str] = {
    "per_token_quant_fp8": "fp8_quant", "per_token_group_quant_fp8": "fp8_quant",
    # A MoE layer with shared experts is the fused_moe kind plus dense work the same launches fuse.
    "fused_moe_shared": "fused_moe",
    # MLA's prefill is the prefill_attention kind with 192-wide keys and 128-wide values once its
    # latent is decompressed (DeepSeek-R1/V3, Kimi K2).
    "mla_prefill_attention": "prefill_attention",
}
LANGUAGE_SUFFIXES = ("_hip", "_cuda", "_triton", "_python")
DTYPE_CARRIED_BY_KIND = frozenset({"gemm_fp8", "fp8_quant", "gemm_mxfp4", "moe_router"})
"""Kinds whose precision is not the workload's: the FP8 and MXFP4 kinds' names fix their data format
(the workload's bf16 is their input), and every MoE router task is float32 whatever its model's
dtype (transformers' Mixtral, DeepSeek-V3 and Qwen3.5-MoE routers upcast their logits before the
softmax; GPT-OSS's takes its top-k in bf16). Before the router was listed here, a bf16 workload's
router time (1.8% of Qwen3.5-35B-A3B's on the H100, 2026-12-06) matched no task."""

_DTYPE_ALIASES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp8": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
}


def normalize_dtype(dtype: object) -> str:
    """'bfloat16' from 'bf16', 'torch.bfloat16' or torch.bfloat16; a one-line error for anything else."""
    text = str(dtype).removeprefix("torch.").lower()
    if text not in _DTYPE_ALIASES:
        known = ", ".join(sorted(set(_DTYPE_ALIASES)))
        raise ApexUserError(f"unknown dtype {str(dtype)!r}: use one of {known}")
    return _DTYPE_ALIASES[text]


def kind_of_task_kernel(kernel: str) -> str | None:
    """The kind a task's ``kernel`` field names, or None for one we do not know."""
    if kernel in KERNEL_KINDS:
        return kernel
    if kernel in KIND_VARIANTS:
        return KIND_VARIANTS[kernel]
    for suffix in LANGUAGE_SUFFIXES:
        if kernel.endswith(suffix) and kernel.removesuffix(suffix) in KERNEL_KINDS:
            return kernel.removesuffix(suffix)
    return None


def _catalogue() -> tuple[tuple[str, str, str | None, str, str], ...]:
    """(id, model, kind, dtype, language) of every task, a row for each model it stands for (its own
    and ``also_models``; the catalogue caches its own reading)."""
    return tuple((t.id, model, kind_of_task_kernel(t.kernel), t.dtype, t.language)
                 for t in all_tasks().values() for model in t.models)


def kinds_with_tasks() -> frozenset[str]:
    """Kinds for which at least one task exists (for any model): what a patch could be graded as."""
    return frozenset(kind for _, _, kind, _, _ in _catalogue() if kind)


def matching_tasks(kind: str, model: str, dtype: str, prefer_language: str | None = None) -> list[str]:
    """Task ids of ``kind`` for ``model`` at ``dtype``, the task in ``prefer_language`` first."""
    if kind == OTHER:
        return []
    found = [
        (language != prefer_language, task_id)
        for task_id, task_model, task_kind, task_dtype, language in _catalogue()
        if task_kind == kind and task_model == model and (kind in DTYPE_CARRIED_BY_KIND or task_dtype == dtype)
    ]
    return [task_id for _, task_id in sorted(found)]
