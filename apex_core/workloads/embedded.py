"""The embedded stack: the model built in this process with transformers, driven step by step.

One ``step(seed)`` is the workload's request mix: a prefill of ``batch × prompt_tokens`` token ids
drawn from the request seed (``requests.prompt_ids``; the spec's seed when None), then
``decode_tokens`` greedy decode steps of one token per sequence through the KV cache. The result
carries the phase times, each decode step's latency, and the digest of the greedy tokens.

Decode runs in one of three ways (``decode_mode``):

- ``graph``: the default on a GPU. A ``transformers.StaticCache`` sized for exactly one request
  mix (``prompt_tokens + decode_tokens`` positions) is reset before each mix and filled by an eager
  prefill; one decode step (forward, argmax, the position advanced) is captured once as a CUDA/HIP
  graph at load and replayed ``decode_tokens`` times per mix, as vLLM and SGLang serve. The token
  and position are tensors the graph reads and writes, so replays need no host work. transformers
  5.x advances each static layer's write position inside ``update`` on every call, replays
  included: the reset before each mix is what keeps writes inside the cache.
- ``eager_static``: the same static cache and the same decode function, called eagerly: what
  ``graphs=False`` asks for, what the CPU runs, and where a graph falls back.
- ``eager_dynamic``: transformers' dynamic cache, growing each step (``kv_cache="dynamic"``); the
  model derives positions itself, so it also checks the static path's explicit positions.

Before a graph is used it is checked: one mix runs eagerly, then again from replays fed the eager
run's tokens, and the logits of the first, second and last decode steps must agree
(``graphs.REPLAY_TOLERANCE``, per dtype). A capture that raises or a replay that disagrees (a patched kernel
that synchronizes with the host, state the host froze into the graph) leaves decode eager for this
workload: ``graph_fallback`` says why in one line, and the notes repeat it.

On a GPU each phase is bracketed by ``torch.cuda.synchronize`` so that wall-clock time is device
time; on the CPU the clock is the time.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Iterator
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.models import get_model
from apex_core.workloads.graphs import GraphCaptureError, capture, graph_kind, relative_error, replay_tolerance
from apex_core.workloads.requests import prompt_ids, token_digest
from apex_core.workloads.results import DecodeMode, StepTiming
from apex_core.workloads.spec import WorkloadSpec


class EmbeddedWorkload:
    """A loaded transformers workload: ``.model``, ``.spec``, ``.step(seed)``, ``.close()``,
    ``.decode_mode`` and ``.graph_fallback``."""

    def __init__(self, spec: WorkloadSpec, model: Any, notes: list[str]) -> None:
        import torch

        self.spec = spec
        self.model = model
        self.notes = notes
        self.timing_method = "torch.cuda.synchronize around each phase" if spec.on_gpu else "wall clock (CPU)"
        self.vocab_size = int(model.config.vocab_size)
        parameters = inspect.signature(model.forward).parameters
        # transformers 5.24 renamed past_key_values to cache (the old name still works, with a warning).
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        # Servers compute logits for the last position only; so does this where the model allows it.
        self._last_logits: dict[str, int] = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
        self._closed = False
        # cpu-mini's matrices are tiny: extra threads only add synchronization (on a busy 2-core
        # machine two threads made its steps 5-10x slower and far noisier than one).
        self._threads = 1 if spec.model == "cpu-mini" else None
        self.graph_fallback: str | None = None
        self.last_tokens: Any = None
        """The last step's greedy token ids on the CPU, int64 ``(batch, 1 + decode_tokens)``: what its
        digest covers (for comparing two workloads' outputs, not only their digests)."""
        self.decode_mode: DecodeMode = "eager_dynamic" if spec.kv_cache == "dynamic" else "eager_static"
        self._graph: Any = None
        self._graph_logits: Any = None
        self._cache: Any = None
        if spec.kv_cache == "static":
            self._cache = _static_cache(model, spec.prompt_tokens + spec.decode_tokens)
            batch, device = spec.batch, spec.device
            self._token = torch.zeros((batch, 1), dtype=torch.long, device=device)
            self._position = torch.zeros((batch, 1), dtype=torch.long, device=device)
            self._prefill_positions = torch.arange(spec.prompt_tokens, device=device).expand(batch, -1)
        with self.threads_set():
            self._set_up_decode()

    # --- set-up ----------------------------------------------------------------------------------

    def _set_up_decode(self) -> None:
        spec = self.spec
        length = spec.prompt_tokens + spec.decode_tokens
        if spec.kv_cache == "dynamic":
            self.notes.append("decode: eager, transformers' dynamic KV cache")
            return
        if not spec.graphs:
            self.notes.append(f"decode: eager over a static KV cache of {length} positions")
            return
        try:
            self._capture_decode()
        except GraphCaptureError as error:
            self._drop_graph()
            self.graph_fallback = str(error)
            self.notes.append(f"decode: eager over a static KV cache of {length} positions; graphs were asked for and "
                              f"fell back to eager: {error}")
            return
        self.decode_mode = "graph"
        self.notes.append(f"decode: replayed from one {graph_kind()} graph over a static KV cache of {length} positions "
                          "(checked against eager decode at load)")

    def _capture_decode(self) -> None:
        import torch

        prompt = self.prompt(self.spec.seed)
        with torch.inference_mode():
            self._graph, self._graph_logits = capture(self._decode_static, self.spec.device, lambda: self._reset_and_prefill(prompt))
            self._check_replay(prompt)

    def _check_replay(self, prompt: Any) -> None:
        """One mix eagerly, then from replays fed the eager tokens: the logits of the first, second
        and last decode steps must agree, or the graph is not used."""
        steps = self.spec.decode_tokens
        checked = sorted({0, min(1, steps - 1), steps - 1})
        self._reset_and_prefill(prompt)
        fed: list[Any] = []
        reference: dict[int, Any] = {}
        for index in range(steps):
            fed.append(self._token.clone())
            logits = self._decode_static()
            if index in checked:
                reference[index] = logits.float().clone()
        self._reset_and_prefill(prompt)
        for index in range(steps):
            self._token.copy_(fed[index])
            self._graph.replay()
            if index in reference:
                error = relative_error(reference[index], self._graph_logits)
                tolerance = replay_tolerance(self.spec.dtype)
                if not error <= tolerance:
                    raise GraphCaptureError(
                        f"the replayed decode step {index + 1} of {steps} gave logits {error:.3g} away from eager decode "
                        f"(relative L2, tolerance {tolerance:g} in {self.spec.dtype}): something the host decided at capture does not "
                        "hold on replay")
        self._sync()

    def _drop_graph(self) -> None:
        self._graph = None
        self._graph_logits = None
        if self.spec.on_gpu:
            import torch

            torch.cuda.synchronize(self.spec.device)
            torch.cuda.empty_cache()

    # --- one request mix -----------------------------------------------------------------------

    def _sync(self) -> None:
        if self.spec.on_gpu:
            import torch

            torch.cuda.synchronize(self.spec.device)

    @contextlib.contextmanager
    def threads_set(self) -> Iterator[None]:
        import torch

        threads = torch.get_num_threads()
        if self._threads:
            torch.set_num_threads(self._threads)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def prompt(self, request_seed: int) -> Any:
        spec = self.spec
        return prompt_ids(self.vocab_size, spec.batch, spec.prompt_tokens, request_seed).to(spec.device)

    def teacher_forced_logits(self, input_ids: Any, keep: int) -> Any:
        """The logits of the last ``keep`` positions of one forward pass over ``input_ids`` without a
        cache: what the token audit (``audit.token_leads``) ranks an arm's tokens by."""
        if self._last_logits:
            return self.model(input_ids=input_ids, use_cache=False, logits_to_keep=keep).logits
        return self.model(input_ids=input_ids, use_cache=False).logits[:, -keep:, :]

    def _forward(self, input_ids: Any, cache: Any, position_ids: Any = None) -> Any:
        extra: dict[str, Any] = dict(self._last_logits)
        if cache is not None:
            extra[self._cache_arg] = cache
        if position_ids is not None:
            extra["position_ids"] = position_ids
        return self.model(input_ids=input_ids, use_cache=True, **extra)

    def _reset_and_prefill(self, prompt: Any) -> None:
        self._cache.reset()
        self._prefill_static(prompt)

    def _prefill_static(self, prompt: Any) -> None:
        """Prefill the (reset) static cache with ``prompt``; the first greedy token lands in
        ``_token`` and the next position in ``_position``."""
        out = self._forward(prompt, self._cache, self._prefill_positions)
        self._token.copy_(out.logits[:, -1, :].argmax(dim=-1, keepdim=True))
        self._position.fill_(self.spec.prompt_tokens)

    def _decode_static(self) -> Any:
        """One decode step over the static cache, in place: reads ``_token`` and ``_position``,
        writes the next greedy token and position; returns the step's logits. What the graph
        captures, and what eager decode calls."""
        out = self._forward(self._token, self._cache, self._position)
        logits = out.logits[:, -1, :]
        self._token.copy_(logits.argmax(dim=-1, keepdim=True))
        self._position.add_(1)
        return logits

    def step(self, seed: int | None = None) -> StepTiming:
        """One prefill and ``decode_tokens`` decode steps, timed per phase and per decode step.

        ``seed``: the request seed that draws the prompts (None: the spec's seed); the shapes and
        so the work timed are the same for every seed.
        """
        if self._closed:
            raise RuntimeError("this workload was closed")
        request_seed = self.spec.seed if seed is None else int(seed)
        with self.threads_set():
            return self._step(request_seed)

    def _step(self, request_seed: int) -> StepTiming:
        import torch

        spec = self.spec
        prompt = self.prompt(request_seed)
        tokens = torch.empty((spec.batch, spec.decode_tokens + 1), dtype=torch.long, device=spec.device)
        decode: list[float] = []
        with torch.inference_mode():
            if self._cache is not None:
                self._cache.reset()  # between request mixes, outside the timed phases
            self._sync()
            start = time.perf_counter()
            if self._cache is None:
                out = self._forward(prompt, None)
                cache = _cache_of(out)
                token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
            else:
                self._prefill_static(prompt)
                token = self._token
            tokens[:, :1].copy_(token)
            self._sync()
            prefill_s = time.perf_counter() - start
            for index in range(1, spec.decode_tokens + 1):
                begin = time.perf_counter()
                if self._graph is not None:
                    self._graph.replay()
                elif self._cache is not None:
                    self._decode_static()
                else:
                    out = self._forward(token, cache)
                    found = _cache_of(out)
                    cache = cache if found is None else found
                    token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
                tokens[:, index:index + 1].copy_(self._token if self._cache is not None else token)
                self._sync()
                decode.append(time.perf_counter() - begin)
        self.last_tokens = tokens.to("cpu")
        return StepTiming(
            prefill_s=prefill_s, decode_step_s=decode, batch=spec.batch,
            prompt_tokens=spec.prompt_tokens, decode_tokens=spec.decode_tokens,
            request_seed=request_seed, token_digest=token_digest(self.last_tokens), token_count=int(tokens.numel()),
            decode_mode=self.decode_mode,
        )

    def close(self) -> None:
        """Free the model, the cache and the graph (and the GPU memory they held)."""
        if self._closed:
            return
        self._closed = True
        self._graph = None
        self._graph_logits = None
        self._cache = None
        self.model = None
        import gc

        gc.collect()
        if self.spec.on_gpu:
            import torch

            torch.cuda.synchronize(self.spec.device)
            torch.cuda.empty_cache()

    def __enter__(self) -> EmbeddedWorkload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _static_cache(model: Any, length: int) -> Any:
    """A ``transformers.StaticCache`` of ``length`` positions for ``model`` (its layers allocate
    their tensors at the first prefill, on the model's device and dtype)."""
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=length)


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
    _check_memory(spec)  # after prepare_imports: counting the weights imports the modeling module
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


MEMORY_HEADROOM = 0.9
"""The weights may take at most this fraction of the GPU's free memory: the KV cache, activations
and the graph's pool need the rest."""


def weight_bytes(spec: WorkloadSpec) -> int:
    """Bytes of the (resolved) workload's weights, counted on the meta device (nothing allocated)."""
    from apex_core.workloads.hf import build_model, torch_dtype

    model = build_model(spec, device="meta")
    size = torch_dtype(spec.dtype).itemsize
    return sum(parameter.numel() for parameter in model.parameters()) * size


def _check_memory(spec: WorkloadSpec) -> None:
    """Refuse in one line a depth whose weights cannot fit the GPU (``--layers full`` of DeepSeek-R1)."""
    if not spec.on_gpu:
        return
    import torch

    needed = weight_bytes(spec)
    free, _ = torch.cuda.mem_get_info(spec.device)
    if needed > MEMORY_HEADROOM * free:
        from apex_core.workloads.spec import DEFAULT_LAYERS

        raise ApexUserError(f"--layers {spec.layers}: {spec.model} at {spec.layers} layers holds {needed / 2**30:.1f} GiB of "
                            f"{spec.dtype} weights and {spec.device} has {free / 2**30:.1f} GiB free; give fewer --layers "
                            f"(its default is {DEFAULT_LAYERS.get(spec.model, 2)})")
