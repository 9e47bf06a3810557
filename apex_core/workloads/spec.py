"""What a workload is: a model of the registry, an inference stack and a request mix.

A ``WorkloadSpec`` names everything that changes what is measured, so two runs of equal specs (on
equal environments) are comparable, and its hash keys the result cache and the drift history.
``layers``, ``dtype``, ``device`` and ``graphs`` may be left open (``None`` / ``"auto"``);
``resolved()`` fixes them for this machine before anything runs, and results record the resolved
spec (``layers="full"`` becomes the registry's real depth).
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from apex_core.errors import ApexUserError, UnknownNameError, nearest
from apex_core.models import MODELS, get_model
from apex_core.workloads.families import FAMILIES

Stack = Literal["transformers", "vllm", "sglang"]
KernelStack = Literal["liger", "fla"]
KERNEL_STACKS: tuple[str, ...] = get_args(KernelStack)
"""Kernel stacks from PyPI that put Triton code into site-packages (``--kernels liger,fla``)."""
DTYPES = ("auto", "bfloat16", "float16", "float32")
KvCache = Literal["static", "dynamic"]
Layers = int | Literal["full"]
FULL = "full"

DEFAULT_LAYERS: dict[str, Layers] = {
    "cpu-mini": 2,
    # dense decoders: the depth measured for Llama-3.1-8B
    "llama-3-2-1b-instruct": 8, "llama-3-1-8b-instruct": 8, "llama-3-1-70b-instruct": 8, "llama-3-3-70b-instruct": 8,
    "deepseek-r1-distill-llama-70b": 8, "mistral-7b-instruct-v0-3": 8, "qwen2-5-7b-instruct": 8,
    "qwen2-5-32b-instruct": 8, "qwen2-5-72b-instruct": 8, "qwen2-5-coder-32b-instruct": 8, "gemma-2-9b-it": 8,
    "gemma-2-27b-it": 8, "phi-3-5-mini-instruct": 8, "phi-4": 8, "falcon-7b-instruct": 8,
    # the fewest layers that hold every kind of layer the model has
    "qwen3-5-27b": 4, "qwen3-5-35b-a3b": 4, "gpt-oss-20b": 2, "gpt-oss-120b": 2, "deepseek-r1": 2, "deepseek-v3": 2,
    "kimi-k2-thinking": 2, "mixtral-8x7b-instruct-v0-1": 2, "mixtral-8x22b-instruct-v0-1": 2,
}
"""The default depth per model, the one place to change it (a number, or "full" for the registry's
real depth).

Llama-3.1-8B: 8 layers, measured on an H200 (2026-12-05, docs/benchmarks.md): the share of device
time of rms_norm + silu_and_mul + rope is 0.961 of the full 32-layer model's (2 layers: 0.837, 4:
0.914), CV 1.1% and drift -0.8% under graphs. The other dense decoders (Llama's other sizes,
Mistral, Qwen2.5, Gemma 2 with four sliding and four full layers, Phi, Falcon) take the same 8,
not yet measured for them. Models with layers of several kinds take the fewest that hold every
kind: Qwen3.5 (dense and MoE): three gated-delta-net layers and one full-attention layer; gpt-oss:
one sliding-window and one full layer; DeepSeek-V3's architecture (R1, V3, Kimi K2): one dense and
one MoE layer; Mixtral: two MoE layers, its experts being most of its device time. A kernel's
share of device time depends on depth (the embedding and LM head weigh more in a shallow model);
benchmarks/workload_depth.py measures the shares and the noise at several depths on a GPU, to
choose these numbers from."""


class WorkloadSpec(BaseModel):
    """One end-to-end workload: which model, on which stack, with which requests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    model: str
    """A model registry slug (``apex_core.models``)."""
    stack: Stack = "transformers"
    layers: Layers | None = None
    """Decoder layers to build: a number, "full" (the registry's real depth), or None (the model's
    default, ``DEFAULT_LAYERS``)."""
    batch: int = Field(default=8, ge=1)
    prompt_tokens: int = Field(default=512, ge=1)
    decode_tokens: int = Field(default=128, ge=1)
    """Decode steps after the prefill, one token per sequence each (greedy, KV cache)."""
    graphs: bool | None = None
    """Decode replayed from one captured CUDA/HIP graph (True) or run eagerly (False); None: graphs
    on a GPU, eager on the CPU, where graphs do not exist. Servers: vLLM's and SGLang's own graphs
    (False passes --enforce-eager / --disable-cuda-graph)."""
    kv_cache: KvCache = "static"
    """transformers stack: a static KV cache sized for the request mix (what graphs need), or
    transformers' dynamic cache, which grows each step (eager only)."""
    dtype: str = "auto"
    """auto: bfloat16 on a GPU, float32 on the CPU."""
    device: str = "auto"
    """auto: cuda (GPU 0) where torch sees a GPU, else cpu; or cpu, cuda, cuda:N."""
    kernels: tuple[str, ...] = ()
    seed: int = 0
    docker_image: str | None = None
    """vLLM/SGLang only: serve from this image instead of a local server (None: local)."""
    description: str = ""

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str) -> str:
        if value not in DTYPES:
            raise ValueError(f"dtype {value!r}: use one of {', '.join(DTYPES)}")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit()):
            return value
        raise ValueError(f"device {value!r}: use auto, cpu, cuda or cuda:N")

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: Layers | None) -> Layers | None:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"layers {value}: give a whole number of 1 or more, or 'full'")
        return value

    @model_validator(mode="after")
    def _graphs_need_a_static_cache(self) -> WorkloadSpec:
        if self.graphs and self.kv_cache == "dynamic" and self.stack == "transformers":
            raise ValueError("graphs replay fixed tensors and need kv_cache 'static'; use the static cache, or eager decode "
                             "(graphs false) with the dynamic one")
        return self

    @field_validator("kernels")
    @classmethod
    def _kernels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [k for k in value if k not in KERNEL_STACKS]
        if unknown:
            raise ValueError(f"unknown kernel stack {unknown[0]!r}: use {', '.join(KERNEL_STACKS)}")
        return tuple(sorted(set(value)))

    def loading_message(self) -> str:
        """What a command says as it loads this (resolved) spec; a model meant for a GPU that runs
        on the CPU says so first: its steps then take seconds to minutes, and a user waiting on a
        silent terminal, or reading CPU figures as a GPU's, should know."""
        said = f"loading {self.id} ({self.stack}, {self.layers} layers, {self.dtype} on {self.device})"
        if self.device == "cpu" and self.model != "cpu-mini":
            said = (f"{self.id} is a GPU workload running on this machine's CPU: slow (seconds to minutes a step), and "
                    f"its figures say nothing about a GPU (cpu-mini is the workload made for a CPU); {said}")
        return said

    def resolved(self) -> WorkloadSpec:
        """This spec with layers, dtype, device and graphs fixed for this machine."""
        device = self.device
        if device == "auto":
            device = "cuda" if _gpu_available() else "cpu"
        dtype = self.dtype
        if dtype == "auto":
            dtype = "float32" if device == "cpu" else "bfloat16"
        graphs = self.graphs
        if graphs is None:
            graphs = device.startswith("cuda") and (self.kv_cache == "static" or self.stack != "transformers")
        return self.model_copy(update={"device": device, "dtype": dtype, "layers": resolved_layers(self), "graphs": graphs})

    def key(self) -> str:
        """The identity of what is measured (description left out): cache and drift key."""
        data = self.model_dump(mode="json", exclude={"description"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")


def full_depth(model: str) -> int:
    """The model's real number of decoder layers, as the registry states it."""
    return get_model(model).num_hidden_layers


def resolved_layers(spec: WorkloadSpec) -> int:
    """The number of layers a spec builds: its own, or the model's default; "full" is the real depth."""
    layers = spec.layers if spec.layers is not None else DEFAULT_LAYERS.get(spec.model, 2)
    return full_depth(spec.model) if layers == FULL else int(layers)


def _gpu_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _catalogue() -> dict[str, WorkloadSpec]:
    specs = [
        WorkloadSpec(
            id="cpu-mini", model="cpu-mini", batch=2, prompt_tokens=16, decode_tokens=8, dtype="float32", device="cpu",
            description="A few-MB float32 Llama-shaped model (hidden 1024) whose RMSNorm layers call the cpu-mini__rms_norm "
                        "task's NumPy entry point; runs anywhere in seconds.",
        )
    ]
    gpu_models = {slug: model.hf_id.rsplit("/", 1)[-1] for slug, model in MODELS.items() if not model.synthetic}
    for slug, name in gpu_models.items():
        differences = FAMILIES[MODELS[slug].family].differences
        specs.append(WorkloadSpec(
            id=slug, model=slug,
            description=f"{name} built from its registry config with transformers (random weights, reduced layers"
                        + (f"; {differences}" if differences else "") + ").",
        ))
    for stack, what in (("vllm", "vLLM"), ("sglang", "SGLang")):
        for slug, name in gpu_models.items():
            specs.append(WorkloadSpec(
                id=f"{slug}-{stack}", model=slug, stack=stack, batch=8, prompt_tokens=512, decode_tokens=128,
                description=f"{name} served by {what} (dummy weights, reduced layers) through its OpenAI-compatible API; "
                            "unverified on hardware.",
            ))
    return {s.id: s for s in specs}


WORKLOADS: dict[str, WorkloadSpec] = _catalogue()


def list_workloads() -> list[WorkloadSpec]:
    """Every workload of the catalogue, in a stable order."""
    return list(WORKLOADS.values())


def get_workload(workload_id: str) -> WorkloadSpec:
    """One workload by id; an unknown id names the valid ones."""
    try:
        return WORKLOADS[workload_id]
    except KeyError:
        raise UnknownWorkloadError(workload_id) from None


class UnknownWorkloadError(UnknownNameError):
    """An unknown workload id; the message names every valid one, the served ones by their rule
    (every model's id with -vllm or -sglang), which keeps the one line readable."""

    def __init__(self, name: str) -> None:
        super().__init__("workload", name, WORKLOADS)
        close = nearest(name, self.known)
        hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
        embedded = [spec.id for spec in WORKLOADS.values() if spec.stack == "transformers"]
        self.args = (f"unknown workload {name!r}: {hint}the workloads are {', '.join(embedded)}, and each but cpu-mini "
                     "also served as <id>-vllm and <id>-sglang (apex workloads list)",)


def customize(
    spec: WorkloadSpec,
    *,
    layers: Layers | str | None = None,
    batch: int | None = None,
    prompt_tokens: int | None = None,
    decode_tokens: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
    kernels: str | tuple[str, ...] | None = None,
    seed: int | None = None,
    docker_image: str | None = None,
    graphs: bool | None = None,
    kv_cache: str | None = None,
) -> WorkloadSpec:
    """``spec`` with the given fields replaced (the CLI's options), checked as a user's input."""
    updates: dict[str, object] = {}
    if layers is not None:
        updates["layers"] = parse_layers(layers)
    for name, value in (("batch", batch), ("prompt_tokens", prompt_tokens),
                        ("decode_tokens", decode_tokens), ("seed", seed)):
        if value is None:
            continue
        if name != "seed" and value < 1:
            flag = "--" + name.replace("_", "-")
            raise ApexUserError(f"{flag} {value}: give a whole number of 1 or more")
        updates[name] = value
    if dtype is not None:
        if dtype not in DTYPES:
            raise ApexUserError(f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}")
        updates["dtype"] = dtype
    if device is not None:
        updates["device"] = device
    if kernels is not None:
        names = tuple(k.strip() for k in (kernels.split(",") if isinstance(kernels, str) else kernels) if k.strip())
        unknown = [k for k in names if k not in KERNEL_STACKS]
        if unknown:
            raise UnknownNameError("kernel stack", unknown[0], KERNEL_STACKS)
        updates["kernels"] = names
    if graphs is not None:
        updates["graphs"] = graphs
    if graphs and (kv_cache or spec.kv_cache) == "dynamic" and spec.stack == "transformers":
        raise ApexUserError("--graphs needs the static KV cache (a graph replays fixed tensors, and the dynamic cache grows): "
                            "leave out --kv-cache dynamic, or decode eagerly with --eager")
    if kv_cache is not None:
        if kv_cache not in ("static", "dynamic"):
            raise ApexUserError(f"--kv-cache {kv_cache!r}: use static (sized for the request mix; graphs need it) or dynamic")
        if spec.stack != "transformers":
            raise ApexUserError(f"--kv-cache applies to the transformers stack; {spec.id} is served by {spec.stack}, "
                                "which pages its own KV cache")
        updates["kv_cache"] = kv_cache
        if kv_cache == "dynamic" and graphs is None:
            updates["graphs"] = False  # graphs need the static cache; asking for the dynamic one means eager
    if docker_image is not None:
        if spec.stack == "transformers":
            raise ApexUserError(f"--docker-image applies to vLLM and SGLang workloads; {spec.id} runs in this process "
                                f"with transformers (try {spec.model}-vllm)")
        updates["docker_image"] = docker_image
    if not updates:
        return spec
    try:
        return WorkloadSpec.model_validate({**spec.model_dump(), **updates})
    except ValueError as error:
        raise ApexUserError(_first_error(error)) from None


def parse_layers(value: Layers | str) -> Layers:
    """A user's --layers: a whole number of 1 or more, or "full"; one line saying so otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == FULL:
            return FULL
        if not text.lstrip("-").isdigit():
            raise ApexUserError(f"--layers {value}: give a whole number of 1 or more, or 'full' for the model's real depth")
        value = int(text)
    if value < 1:
        raise ApexUserError(f"--layers {value}: give a whole number of 1 or more, or 'full' for the model's real depth")
    return value


def _first_error(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors()[0]
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {message}" if where else message
    return str(error)


def registry_model(spec: WorkloadSpec):
    """The registry entry of the workload's model."""
    return get_model(spec.model)
