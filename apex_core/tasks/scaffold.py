"""``apex tasks new``: a new task of an existing kernel for a model of the registry, as a TOML file
that already loads through the catalogue.

What a task shares with the other tasks of its kernel comes from the kernel's defaults file and is
not written again. What each task states for itself (its prose, and whatever its kernel's tasks do
not share, such as a GEMM's projection sizes) is copied from the existing task of the kernel that
overrides the fewest defaults, under TODO comments that say what to rewrite for the new model. The
file is checked by the catalogue's own loader before it is written, so a model that lacks a value
the kernel needs (``@kv_lora_rank`` for MLA) is refused with the loader's one-line reason.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from apex_core.errors import ApexUserError, TaskDefinitionError, UnknownNameError
from apex_core.models import MODELS, ModelConfig, get_model
from apex_core.tasks import catalog
from apex_core.tasks.families import DEFAULTS_SUFFIX, get_kernel_defaults, kernel_defaults
from apex_core.tasks.schema import Task
from apex_core.tasks.reference_solutions import REFERENCE_SOLUTIONS_DIR, model_constants, reference_solution_source_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

IDENTITY_KEYS = ("id", "model", "kernel", "also_models")
NEEDS_NORM: dict[str, tuple[str, str]] = {
    **{kernel: ("rms", "RMSNorm") for kernel in ("rms_norm", "fused_add_rms_norm", "rms_norm_hip")},
    "layer_norm": ("layer", "LayerNorm"),
}
"""Norm kernels -> the ``ModelConfig.norm`` of the models that run them, and its name: an RMSNorm
kernel has no mean and no bias, so it cannot stand for Falcon's LayerNorm, and a LayerNorm kernel
is not what Llama's RMSNorm layers run."""
NEEDS_QK_NORM = frozenset({"qk_norm"})
"""Kernels only a model whose attention normalizes each query and key head runs (the catalog's
``extra["qk_norm"]``, as Qwen3.5's q_norm and k_norm). No config.json key says it (the modeling
code does), so a model whose entry lacks the flag is taken to have none."""
NEEDS_SHARED_EXPERTS = frozenset({"fused_moe_shared"})
"""Kernels only a model with always-on shared experts beside its routed ones runs
(``num_shared_experts`` > 0: DeepSeek-V3/R1, Kimi K2, Qwen3.5-MoE; not Mixtral or GPT-OSS)."""
NEEDS_MLA = frozenset({"mla_prefill_attention"})
"""Kernels only a model with multi-head latent attention runs (``attention`` "mla": DeepSeek-V3/R1,
Kimi K2): their fields (``@qk_nope_head_dim``, ``@mscale_all_dim``) exist for no other model."""
MLA_VARIANTS: dict[str, str] = {"prefill_attention": "mla_prefill_attention"}
"""Attention kernels an MLA model runs as a variant of its own: decompressed, its prefill has
192-wide queries and keys, 128-wide values and a YaRN-scaled softmax, which a prefill_attention
task (one head dim, head_dim^-1/2) would get wrong."""
NEEDS_EXPERT_QUANTIZATION: dict[str, str] = {"gemm_mxfp4": "mxfp4"}
"""Kernels whose weight format only a model whose checkpoint stores its experts so runs (the
catalog's ``extra["expert_quantization"]``, from the config's ``quantization_config``: GPT-OSS's
experts are MXFP4). A model whose entry lacks the key serves no expert in that format."""


class Scaffold(BaseModel):
    """What ``scaffold_task`` wrote and what is left for a person to do."""

    task_id: str
    path: Path
    defaults: Path
    copied_from: str | None
    solution: Path | None
    """The reference solution that applies to the new task as things stand (the kernel's shared one),
    or None where it has none yet."""
    to_do: list[str]


def _known(kind: str, name: str, known: list[str]) -> ApexUserError:
    return ApexUserError(f"unknown {kind} {name!r}; known {kind}s: {', '.join(sorted(known))}")


def _definition_path(task_id: str) -> Path | None:
    for directory in catalog.definition_dirs():
        path = directory / f"{task_id}.toml"
        if path.is_file():
            return path
    return None


def _zero_centered(model: ModelConfig) -> bool:
    return bool(model.extra.get("rms_norm_zero_centered"))


TRAITS: dict[str, Callable[[ModelConfig], object]] = {
    "attention": lambda m: m.attention,
    "mlp": lambda m: m.mlp,
    "router": lambda m: m.router_scoring,
    "zero_centered_norm": _zero_centered,
    "rope_scaling": lambda m: m.rope_scaling.split(" ", 1)[0],
}
DECIDING_TRAIT = {
    "rms_norm": "zero_centered_norm", "fused_add_rms_norm": "zero_centered_norm", "moe_router": "router",
    "rope": "rope_scaling", "prefill_attention": "attention", "paged_decode_attention": "attention",
    "qk_norm": "zero_centered_norm",
    "top_k_top_p_sampling": "final_logit_softcap",
    "fused_moe_shared": "shared_expert_gate", "mla_prefill_attention": "attention",
}
"""The trait that picks a kernel's variant (a 1 + w norm, a grouped sigmoid router): it outweighs
every other trait together, so a Gemma norm is never copied from a plain one for sharing an
attention kind with it."""
KERNEL_TRAITS: dict[str, Callable[[ModelConfig], object]] = {
    "final_logit_softcap": lambda m: bool(m.extra.get("final_logit_softcapping")),
    # Qwen's MoE configs size the shared expert with shared_expert_intermediate_size and gate it
    # with a sigmoid (Qwen3_5MoeSparseMoeBlock); DeepSeek's n_shared_experts are ungated.
    "shared_expert_gate": lambda m: "shared_expert_intermediate_size" in m.extra,
}
"""Traits that count only for the kernel they decide (``DECIDING_TRAIT``), so adding one leaves
every other kernel's choice of sibling as it was: Gemma 2's sampler soft-caps its logits."""


def _field(name: str) -> Callable[[ModelConfig], object | None]:
    """A param read from an optional model fact: ``"@name"`` where the model states it, else None."""
    return lambda m: f"@{name}" if m.extra.get(name) else None


MODEL_PARAMS: dict[str, dict[str, Callable[[ModelConfig], object | None]]] = {
    "top_k_top_p_sampling": {"softcap": _field("final_logit_softcapping")},
    "fused_moe_shared": {"routed_scaling_factor": _field("routed_scaling_factor"),
                         "shared_gate": KERNEL_TRAITS["shared_expert_gate"]},
}
"""Params a kernel takes from the model (param -> its value for a model, None where the model says
nothing and the default, off, holds), whatever the task the scaffold copied from had: a Gemma 2
sampler copied from a Llama one would otherwise sample uncapped logits, a Llama one copied from
Gemma's would cap them, and a Qwen MoE layer copied from DeepSeek's would lose its shared gate."""


def _likeness(model: ModelConfig, other: ModelConfig, kernel: str = "") -> int:
    """How much of what shapes a kernel's variant two models share: the architecture family first,
    then the trait that decides the kernel's variant, then the others (attention and MLP kinds, the
    router's scoring, a zero-centered norm, the rope scaling's type)."""
    score = 8 * (model.family == other.family)
    for name, trait in TRAITS.items():
        if trait(model) == trait(other):
            score += len(TRAITS) if DECIDING_TRAIT.get(kernel) == name else 1
    kernel_trait = KERNEL_TRAITS.get(DECIDING_TRAIT.get(kernel, ""))
    if kernel_trait is not None and kernel_trait(model) == kernel_trait(other):
        score += len(TRAITS)
    return score


def _model_params(kernel: str, config: ModelConfig, body: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Set ``body["params"]`` for the kernel's MODEL_PARAMS from ``config``, in place. A task's
    ``[params]`` replaces the defaults' whole, so the params start from the defaults' and the copy's;
    where they end equal to the defaults', the key is left out."""
    wanted = MODEL_PARAMS.get(kernel)
    if not wanted:
        return
    default_params = dict(defaults.get("params", {}))
    params = {**default_params, **body.get("params", {})}
    for param, value_for in wanted.items():
        value = value_for(config)
        if value is not None:
            params[param] = value
        elif param in default_params:
            params[param] = default_params[param]
        else:
            params.pop(param, None)
    if params == default_params:
        body.pop("params", None)
    else:
        body["params"] = params


def _closest_sibling(kernel: str, model: ModelConfig) -> tuple[str, dict[str, Any]] | None:
    """The existing task of ``kernel`` to copy for ``model``: the one whose model is most like it
    (``_likeness``: a Gemma norm is copied from Qwen3.5's zero-centered one), then the one that
    states the fewest keys of its own (the most typical)."""
    siblings = []
    for task in sorted(catalog.all_tasks().values(), key=lambda t: t.id):
        if task.kernel != kernel or task.architecture.synthetic:
            continue
        path = _definition_path(task.id)
        if path is not None:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
            siblings.append((-_likeness(model, task.architecture, kernel), len(raw), task.id, raw))
    if not siblings:
        return None
    *_, task_id, raw = min(siblings, key=lambda sibling: sibling[:3])
    return task_id, raw


# --- TOML text -----------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if "\n" in value and '"""' not in value and "\\" not in value:
            return '"""\n' + value + '"""'
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_scalar(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def render_definition(model: str, kernel: str, family: str, body: dict[str, Any], header: list[str], copied_note: list[str]) -> str:
    """The definition's text: identity, then the copied keys (scalars before tables, as TOML needs)."""
    lines = [*header, f'model = "{model}"', f'kernel = "{kernel}"']
    lines += [
        "# Every key not stated here comes from the kernel's defaults, where a key stated here replaces",
        f"# the default whole: apex_core/kernels/{family}/{kernel}{DEFAULTS_SUFFIX}",
    ]
    scalars = {k: v for k, v in body.items() if not isinstance(v, dict) and not _is_table_array(v)}
    tables = {k: v for k, v in body.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in body.items() if _is_table_array(v)}
    if body:
        lines += ["", *copied_note]
    lines += [f"{key} = {_scalar(value)}" for key, value in scalars.items()]
    for key, table in tables.items():
        lines += ["", f"[{key}]", *(f"{k} = {_scalar(v)}" for k, v in table.items())]
    for key, rows in arrays.items():
        for row in rows:
            lines += ["", f"[[{key}]]", *(f"{k} = {_scalar(v)}" for k, v in row.items())]
    return "\n".join(lines) + "\n"


# --- the scaffold ---------------------------------------------------------------------------------


def _same_behaviour(task: Task) -> Task | None:
    """An existing task that runs exactly what ``task`` would (``Task.behaviour_hash``): one task
    stands for every model that runs a kernel the same way (``Task.also_models``)."""
    wanted = task.behaviour_hash()
    return next((t for t in catalog.all_tasks().values() if t.id != task.id and t.behaviour_hash() == wanted), None)


def _mark_same(text: str, same: Task, model: str) -> str:
    """The scaffold with a TODO saying that, as copied, it runs exactly ``same`` (a task whose numbers
    are all the model's is one task for both: ``also_models``; one that copied literal sizes is not)."""
    first, _, rest = text.partition("\n")
    return (f"{first}\n# TODO: as copied, this runs exactly {same.id} (the same shapes, parameters and tolerances).\n"
            f"# If {model}'s numbers are the same, delete this file and add \"{model}\" to that task's also_models\n"
            f"# instead; else set this task's own numbers below (no two tasks may run the same).\n{rest}")


def scaffold_task(model: str, kernel: str, directory: Path | None = None, force: bool = False) -> Scaffold:
    """Write ``<directory>/<model>__<kernel>.toml`` (default: the shipped definitions), checked as the
    catalogue checks it. Every refusal is one ApexUserError line."""
    try:
        config = get_model(model)
    except UnknownNameError:
        raise _known("model", model, list(MODELS)) from None
    try:
        defaults = get_kernel_defaults(kernel)
    except UnknownNameError:
        raise _known("kernel", kernel, list(kernel_defaults())) from None
    task_id = f"{config.slug}__{kernel}"
    directory = directory or catalog.DEFINITIONS_DIR
    if not directory.is_dir():
        raise ApexUserError(f"--dir {directory} is not a folder; create it first or leave --dir out")
    path = directory / f"{task_id}.toml"
    existing = _definition_path(task_id)
    if existing is not None and existing.resolve() != path.resolve():
        raise ApexUserError(f"task {task_id} is already defined in {existing}; edit that file instead")
    if path.exists() and not force:
        raise ApexUserError(f"task {task_id} already exists: {path}; edit it, or pass --force to write it again")
    standing = next((t for t in catalog.all_tasks().values() if t.kernel == kernel and config.slug in t.also_models), None)
    if standing is not None:
        raise ApexUserError(f"{standing.id} already stands for {config.slug} (its also_models): {config.slug} runs "
                            f"{kernel} exactly as {standing.model} does; take it out of that list first if it no longer does")
    if kernel in NEEDS_NORM and config.norm != NEEDS_NORM[kernel][0]:
        raise ApexUserError(f"{config.slug} normalizes with {config.norm!r} norm, not {NEEDS_NORM[kernel][1]}: "
                            f"{kernel} is not a kernel it runs")
    if kernel in NEEDS_SHARED_EXPERTS and config.num_shared_experts <= 0:
        raise ApexUserError(f"{config.slug} has no shared experts (its catalog entry has num_shared_experts 0): "
                            f"{kernel} is not a kernel it runs")
    if kernel in NEEDS_QK_NORM and not config.extra.get("qk_norm"):
        raise ApexUserError(f"{config.slug} normalizes no query or key heads (its catalog entry has no qk_norm): "
                            f"{kernel} is not a kernel it runs")
    if kernel in NEEDS_MLA and config.attention != "mla":
        raise ApexUserError(f"{config.slug} attends with {config.attention!r} attention, not multi-head latent attention: "
                            f"{kernel} is not a kernel it runs")
    if kernel in MLA_VARIANTS and config.attention == "mla":
        raise ApexUserError(f"{config.slug}'s attention is multi-head latent attention (query/key heads "
                            f"{config.head_dim} wide, value heads {config.extra.get('v_head_dim')}, a YaRN-scaled "
                            f"softmax): its {kernel} is {MLA_VARIANTS[kernel]}")
    quantization = NEEDS_EXPERT_QUANTIZATION.get(kernel)
    if quantization is not None and config.extra.get("expert_quantization") != quantization:
        raise ApexUserError(f"{config.slug}'s checkpoint stores no experts in {quantization} (its catalog entry's "
                            f"expert_quantization is {config.extra.get('expert_quantization')!r}): {kernel} is not a kernel it runs")

    sibling = _closest_sibling(kernel, config)
    hf_id = config.hf_id
    header = [f"# TODO: {kernel} of {hf_id}: where this kernel runs in the model, in a line or two."]
    if sibling is None:
        copied_from = None
        body: dict[str, Any] = {
            "description": f"TODO: what {kernel} computes at {hf_id}'s sizes, in one sentence.",
            "contract": f"TODO: the arguments (dtype, shape, device), what to return, and what must not be used for {kernel}.\n",
        }
        note = ["# TODO: write the description and the contract; delete the TODO lines."]
        if "test_shapes" not in defaults.values and defaults.values.get("cpu_shapes"):
            # A kernel's first task: the schema needs test shapes and no sibling has any; the
            # defaults' interpreter shapes load and run, and the TODO says they are not the model's.
            body["test_shapes"] = [dict(shape) for shape in defaults.values["cpu_shapes"]]
            note.append("# TODO: the test_shapes below are the kernel's cpu_shapes, placeholders: write the model's "
                        "test, hidden and benchmark shapes.")
    else:
        copied_from, raw = sibling
        body = {k: v for k, v in raw.items() if k not in IDENTITY_KEYS}
        note = [
            f"# TODO: copied from {copied_from}. Rewrite the description and contract for",
            f"# {hf_id} (its sizes and constants), check every key below for this model, then",
            "# delete the TODO lines.",
        ]
    _model_params(kernel, config, body, defaults.values)
    text = render_definition(config.slug, kernel, defaults.family, body, header, note)

    with tempfile.TemporaryDirectory(prefix="apex-new-task-") as scratch:
        trial = Path(scratch) / path.name
        trial.write_text(text, encoding="utf-8")
        try:
            task = catalog.load_task_file(trial)
        except TaskDefinitionError as exc:
            reason = str(exc).replace(f"task definition {trial}: ", "")
            raise ApexUserError(f"cannot scaffold {task_id}: {reason}") from None
    same = _same_behaviour(task)
    if same is not None:  # as copied; the sibling's literal sizes may be what makes it the same
        text = _mark_same(text, same, config.slug)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ApexUserError(f"cannot write {path}: {exc.strerror}") from None
    catalog.clear_cache()

    to_do = [] if same is None else [
        f"as copied it runs exactly {same.id}: if {config.slug}'s numbers are the same, delete this file and add "
        f"\"{config.slug}\" to that task's also_models instead; else set its own numbers"]
    to_do += [
        f"rewrite the description and contract for {hf_id}"
        + (f" (copied from {copied_from})" if copied_from else "")
        + " and delete the TODO comments",
        "check the shapes (test, hidden, benchmark, cpu) and params against the model's sizes: "
        + f"apex tasks show {task_id}",
    ]
    solution = reference_solution_source_path(task)
    if solution is None:
        to_do.append(f"write our solution: {REFERENCE_SOLUTIONS_DIR.name}/{kernel}/{config.slug}.py (or the kernel's solution.py)")
    else:
        try:
            model_constants(task, solution)
        except TaskDefinitionError:
            to_do.append(f"add a [{config.slug}] table to {REFERENCE_SOLUTIONS_DIR.name}/{kernel}/constants.toml "
                         "(the launch constants of the shared solution)")
    to_do.append(f"verify it: apex tasks verify --task {task_id} (CPU: correctness; GPU: correctness and speed)")
    return Scaffold(task_id=task_id, path=path, defaults=defaults.path, copied_from=copied_from, solution=solution, to_do=to_do)
