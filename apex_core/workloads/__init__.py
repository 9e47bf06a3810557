"""End-to-end workloads: a model of the registry, an inference stack and a request mix, benchmarked.

Public API (used by the profiler, the identifier and the pipeline):

- ``get_workload(id) -> WorkloadSpec``, ``list_workloads()``: the catalogue (``spec``);
- ``load(spec) -> LoadedWorkload``: ``.model`` (a torch module; None for a server stack),
  ``.spec`` (resolved), ``.step(seed=None)`` (one prefill + decode request mix, synchronized: what
  the profiler wraps; prompts drawn from the request seed, the spec's when None; the result carries
  ``token_digest``, ``token_count``, ``request_seed``, ``decode_mode``), ``.decode_mode`` (graph,
  eager_static, eager_dynamic), ``.graph_fallback`` (why graphs, asked for, are not used) and
  ``.close()``;
- ``benchmark(spec, runs=5, ...) -> BenchmarkResult``: warm-up, N runs, medians, CV gate, drift
  check, cache, ``results/<run-id>/benchmark.json``.

Stacks: ``transformers`` builds the model in this process from its registry config (``hf``,
``embedded``), with Liger-Kernel or flash-linear-attention on request (``stacks``); ``vllm`` and
``sglang`` start a server and load it over its OpenAI-compatible API (``serving``). ``cpu_mini``
makes the CPU model's RMSNorm call the cpu-mini__rms_norm task's entry point. ``graphs`` captures
and checks the decode step's CUDA/HIP graph; ``requests`` draws prompts from request seeds and
digests the greedy tokens (``token_digest``).
"""

from apex_core.workloads.requests import prompt_ids, token_digest
from apex_core.workloads.results import BenchmarkResult, RunResult, StepTiming
from apex_core.workloads.runner import Workload as LoadedWorkload
from apex_core.workloads.runner import benchmark, load
from apex_core.workloads.spec import WorkloadSpec, customize, get_workload, list_workloads

__all__ = [
    "BenchmarkResult",
    "LoadedWorkload",
    "RunResult",
    "StepTiming",
    "WorkloadSpec",
    "benchmark",
    "customize",
    "get_workload",
    "list_workloads",
    "load",
    "prompt_ids",
    "token_digest",
]
