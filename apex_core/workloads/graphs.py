"""One call captured as a CUDA/HIP graph and replayed, and the check that a replay computes what the
eager call computes.

Why: an eager decode step of a transformers model is bound by the host (Python and kernel
launches), so a kernel's speedup hardly shows in tokens/s, and the host's noise swamps it (the
H200's figures in shared/research/e2e_workloads.md: CV up to 14% eager, 0.03% replayed). vLLM and
SGLang capture decode in graphs by default; so does this.

How, following torch's documented recipe (``torch.cuda.graph``): the callable runs a few times on a
side stream first (lazy initialization, cuBLAS workspaces, Triton's compilation and autotuning
happen there, not inside the capture), the state it reads is then prepared again, and one call is
captured. A replay re-runs the captured kernels on the same tensors: inputs are written into the
tensors the capture read, outputs are read from the tensors it returned. Anything the host decided
during capture (Python branches, ints) is frozen into the graph; ``relative_error`` is how callers
compare a replay with the eager call to catch what froze wrongly.

A capture that cannot happen (no GPU, an operation that synchronizes with the host, a kernel that
cannot be captured) raises ``GraphCaptureError`` with one line saying why; the caller falls back to
eager and records that line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WARMUP_CALLS = 2
"""Eager calls on the side stream before the capture (torch's examples use a few; one compiles and
autotunes, the second runs warm)."""

REPLAY_TOLERANCE: dict[str, float] = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 5e-2}
"""Largest relative L2 error between a replay's output and the eager call's on the same state, per
model dtype. Both run the same model on the same data, but not always the same kernels: under
capture cuBLAS may pick other algorithms, and their rounding compounds through the layers and the
KV cache the replays write. Measured (H200, 2026-12-04): Llama-3.1-8B at its full 32 layers in
bfloat16 replayed its second decode step 1.18e-2 away from eager (its first agreed closer), a
few roundings of 2^-8; a stale position, mask or cache state is off by tens of percent or more."""


def replay_tolerance(dtype: str) -> float:
    """The tolerance of a model dtype (float32's, the strictest, for any other)."""
    return REPLAY_TOLERANCE.get(dtype, REPLAY_TOLERANCE["float32"])


class GraphCaptureError(RuntimeError):
    """Why a call could not be captured or replayed faithfully, in one line."""


def graph_kind() -> str:
    """"HIP" on ROCm's torch, else "CUDA": the words a note uses."""
    import torch

    return "HIP" if getattr(torch.version, "hip", None) else "CUDA"


def root_cause(error: BaseException) -> BaseException:
    """The first exception of a chain: a failed capture often raises again in ``capture_end``,
    which hides the operation that broke it. A ``raise ... from None`` ends the chain there."""
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        earlier = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if earlier is None:
            break
        error = earlier
    return error


def one_line(error: BaseException, limit: int = 240) -> str:
    """``Type: first line`` of an exception, shortened to ``limit`` characters."""
    text = str(error).strip().splitlines()
    line = f"{type(error).__name__}: {text[0].strip()}" if text else type(error).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def capture(fn: Callable[[], Any], device: str, prepare: Callable[[], None], warmup: int = WARMUP_CALLS) -> tuple[Any, Any]:
    """Capture one call of ``fn`` on ``device``; returns ``(graph, output)``.

    ``prepare()`` puts the state ``fn`` reads where a real call finds it (for a decode step: the
    cache reset and the prompt prefilled); it runs before each warm-up call and before the capture,
    on the stream current at the time. After the capture the state is as ``prepare()`` left it
    (capturing runs nothing), and ``graph.replay()`` makes the captured call happen.
    """
    import torch

    if not device.startswith("cuda"):
        raise GraphCaptureError(f"CUDA/HIP graphs need a GPU and this workload runs on the {device.upper()}")
    if not torch.cuda.is_available():
        raise GraphCaptureError("CUDA/HIP graphs need a GPU and torch sees none here")
    # The warm-up is the eager call itself: if it fails, the model cannot run at all, which is no
    # reason to fall back to eager, so its error goes to the caller as it is.
    with torch.cuda.device(device):
        prepare()  # the first state on the main stream: lazily built tensors belong to it
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                prepare()
                fn()
        torch.cuda.current_stream().wait_stream(side)
        prepare()
        torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    index = torch.device(device).index
    generator = torch.cuda.default_generators[torch.cuda.current_device() if index is None else index]
    before = generator.clone_state()
    try:
        with torch.cuda.device(device):
            with torch.cuda.graph(graph):
                output = fn()
            torch.cuda.synchronize()
    except Exception as error:
        _release_generator(generator, before)
        raise GraphCaptureError(f"{graph_kind()} graph capture failed: {one_line(root_cause(error))}") from error
    return graph, output


def _release_generator(generator: Any, before: Any) -> None:
    """Put back the device's default generator as it was before a capture that failed.

    A capture marks the generator as capturing when it begins and unmarks it when it ends; a
    capture the driver invalidated (a host sync, a forbidden call) raises in between, and the mark
    stays. Every random draw after that on the device fails with "Offset increment outside graph
    capture encountered unexpectedly": in one process that built model after model, one model's
    failed capture (and eager fallback) made every later model's weight initialization fail
    (workloads_bench on the H100, 2026-12-06). A state cloned before the capture was never marked.
    """
    generator.graphsafe_set_state(before)


def relative_error(reference: Any, candidate: Any) -> float:
    """||candidate - reference|| / ||reference|| in float32 (0 when both are zero; inf when the
    shapes differ or the candidate holds NaN or inf)."""
    import torch

    if tuple(reference.shape) != tuple(candidate.shape):
        return float("inf")
    ref = reference.detach().to(torch.float32)
    got = candidate.detach().to(torch.float32)
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    scale = float(torch.linalg.vector_norm(ref))
    diff = float(torch.linalg.vector_norm(got - ref))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale
