"""The embedded stack: the model built in this process with transformers, driven step by step.

One ``step()`` is the workload's request mix: a prefill of ``batch × prompt_tokens`` fixed token
ids, then ``decode_tokens`` greedy decode steps of one token per sequence through the KV cache.
On a GPU each phase is bracketed by ``torch.cuda.synchronize`` so that wall-clock time is device
time; on the CPU the clock is the time. The prompt is drawn once from the spec's seed, so every
step does identical work.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import get_model
from apex_core.workloads.results import StepTiming
from apex_core.workloads.spec import WorkloadSpec


class EmbeddedWorkload:
    """A loaded transformers workload: ``.model``, ``.spec``, ``.step()``, ``.close()``."""

    def __init__(self, spec: WorkloadSpec, model: Any, notes: list[str]) -> None:
        import torch

        self.spec = spec
        self.model = model
        self.notes = notes
        self.timing_method = "torch.cuda.synchronize around each phase" if spec.on_gpu else "wall clock (CPU)"
        vocab = int(model.config.vocab_size)
        generator = torch.Generator(device="cpu").manual_seed(spec.seed + 1)
        prompt = torch.randint(0, vocab, (spec.batch, spec.prompt_tokens), generator=generator)
        self.input_ids = prompt.to(spec.device)
        parameters = inspect.signature(model.forward).parameters
        # transformers 5.24 renamed past_key_values to cache (the old name still works, with a warning).
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self._closed = False
        # cpu-mini's matrices are tiny: extra threads only add synchronization (on a busy 2-core
        # machine two threads made its steps 5-10x slower and far noisier than one).
        self._threads = 1 if spec.model == "cpu-mini" else None

    def _sync(self) -> None:
        if self.spec.on_gpu:
            import torch

            torch.cuda.synchronize(self.spec.device)

    def step(self) -> StepTiming:
        """One prefill and ``decode_tokens`` decode steps, timed per phase and per decode step."""
        import torch

        if self._closed:
            raise RuntimeError("this workload was closed")
        model = self.model
        threads = torch.get_num_threads()
        if self._threads:
            torch.set_num_threads(self._threads)
        try:
            return self._step(model)
        finally:
            torch.set_num_threads(threads)

    def _step(self, model: Any) -> StepTiming:
        import torch

        with torch.inference_mode():
            self._sync()
            start = time.perf_counter()
            out = model(input_ids=self.input_ids, use_cache=True)
            cache = _cache_of(out)
            token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            self._sync()
            prefill_s = time.perf_counter() - start
            decode: list[float] = []
            for _ in range(self.spec.decode_tokens):
                begin = time.perf_counter()
                out = model(input_ids=token, use_cache=True, **{self._cache_arg: cache})
                found = _cache_of(out)
                cache = cache if found is None else found
                token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                self._sync()
                decode.append(time.perf_counter() - begin)
        return StepTiming(
            prefill_s=prefill_s, decode_step_s=decode, batch=self.spec.batch,
            prompt_tokens=self.spec.prompt_tokens, decode_tokens=self.spec.decode_tokens,
        )

    def close(self) -> None:
        """Free the model (and the GPU memory it held)."""
        if self._closed:
            return
        self._closed = True
        self.model = None
        self.input_ids = None
        import gc

        gc.collect()
        if self.spec.on_gpu:
            import torch

            torch.cuda.empty_cache()

    def __enter__(self) -> EmbeddedWorkload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cache_of(out: Any) -> Any:
    for name in ("cache", "past_key_values"):  # 5.24 names it cache (past_key_values warns)
        value = getattr(out, name, None)
        if value is not None:
            return value
    return None


def preflight_embedded(spec: WorkloadSpec) -> None:
    """Refuse, before anything is built, what cannot run here: a missing GPU, package or stack."""
    from apex_core.workloads import stacks
    from apex_core.workloads.hf import config_class

    config = get_model(spec.model)
    if spec.model == "cpu-mini" and spec.on_gpu:
        raise ApexUserError(f"--device {spec.device}: cpu-mini runs on the CPU (its norms call the NumPy task's entry point); "
                            "leave out --device, or benchmark a GPU workload such as llama-3-1-8b-instruct")
    _check_device(spec)
    config_class(config)
    stacks.check_stacks(spec.kernels, config, spec.on_gpu)


def load_embedded(spec: WorkloadSpec) -> EmbeddedWorkload:
    """Build a (resolved) transformers workload: checks, kernel stacks, model, inputs."""
    from apex_core.workloads import stacks
    from apex_core.workloads.hf import build_model

    config = get_model(spec.model)
    preflight_embedded(spec)
    notes = stacks.prepare_imports(spec.kernels, config)
    model = build_model(spec)
    notes += stacks.apply_stacks(model, spec.kernels, config)
    if spec.model == "cpu-mini":
        from apex_core.workloads.cpu_mini import label, rms_norm_implementation

        notes.append(f"RMSNorm layers call {label(rms_norm_implementation())} (cpu-mini__rms_norm's entry point)")
    return EmbeddedWorkload(spec, model, notes)


def _check_device(spec: WorkloadSpec) -> None:
    if not spec.on_gpu:
        return
    import torch

    if not torch.cuda.is_available():
        raise ApexUserError(f"--device {spec.device}: torch sees no GPU here; use --device cpu (float32) or run on a GPU machine")
    index = int(spec.device.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise ApexUserError(f"--device {spec.device}: only {torch.cuda.device_count()} GPU(s) are visible; use cuda:0 .. "
                            f"cuda:{torch.cuda.device_count() - 1}")
