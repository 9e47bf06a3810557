"""What a benchmark measures and reports: steps, runs, the summary over runs, gates and drift.

Throughput definitions (the same for every stack):
- ``prefill_tokens_per_s``: prompt tokens of the batch / prefill time (for a server: until the
  last request's first token);
- ``decode_tokens_per_s``: tokens produced by the decode steps / decode time;
- ``tokens_per_s``: all tokens (prompt + decoded) / wall time of the request mix, the headline
  figure (median over runs) that the model-level reward compares before and after patching.
Latency percentiles are in milliseconds, linear interpolation (NumPy's default).

Each step also says how decode ran (``decode_mode``), which request seed drew its prompts, and the
SHA-256 of the greedy tokens it produced (``token_digest``, ``token_count``; ``requests`` defines
both): what a caller that cannot trust the process that ran the step checks.
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.workloads.requests import combined_digest
from apex_core.workloads.spec import WorkloadSpec

DecodeMode = Literal["graph", "eager_static", "eager_dynamic"]


class StepTiming(BaseModel):
    """One request mix as measured: a prefill phase, then the decode steps."""

    prefill_s: float = Field(ge=0)
    decode_step_s: list[float] = Field(default_factory=list)
    """Latency of each decode step (embedded) or each inter-token gap, pooled over requests (servers)."""
    batch: int = Field(ge=1)
    prompt_tokens: int = Field(ge=0)
    decode_tokens: int = Field(ge=0)
    decode_s: float | None = None
    """Decode phase time; None: the sum of ``decode_step_s`` (embedded steps run back to back)."""
    wall_s: float | None = None
    """Whole request mix; None: prefill + decode."""
    ttft_s: list[float] = Field(default_factory=list)
    """Servers: each request's time to first token."""
    generated_tokens: int | None = None
    """Servers: tokens the decode steps really produced (None: batch × decode_tokens)."""
    request_seed: int | None = None
    """The seed that drew the prompts (embedded and servers); None for merged mixes of several seeds."""
    token_digest: str | None = None
    """SHA-256 (hex) of the greedy token ids, little-endian int64, row-major (batch, 1 + decode_tokens):
    the prefill's token then one per decode step (``requests.token_digest``). None where the stack
    does not return token ids (servers)."""
    token_count: int | None = None
    """How many token ids the digest covers: batch × (decode_tokens + 1) for one embedded mix."""
    decode_mode: DecodeMode | None = None
    """Embedded: graph (replayed CUDA/HIP graph), eager_static or eager_dynamic; None for servers."""

    @property
    def decode_time(self) -> float:
        return self.decode_s if self.decode_s is not None else sum(self.decode_step_s)

    @property
    def wall_time(self) -> float:
        return self.wall_s if self.wall_s is not None else self.prefill_s + self.decode_time

    @property
    def prompt_token_count(self) -> int:
        return self.batch * self.prompt_tokens

    @property
    def decode_token_count(self) -> int:
        return self.generated_tokens if self.generated_tokens is not None else self.batch * self.decode_tokens


def merge_steps(steps: list[StepTiming]) -> StepTiming:
    """Several request mixes of one workload measured back to back, as one longer mix.

    Token counts add up, phase times add up, per-step latencies are pooled, so every rate of the
    merged mix is total tokens over total time.
    """
    if not steps:
        raise ValueError("merge_steps needs at least one step")
    if len(steps) == 1:
        return steps[0]
    first = steps[0]
    if any(step.batch != first.batch for step in steps):
        raise ValueError("merge_steps: the steps have different batch sizes")
    known = lambda values: None if any(v is None for v in values) else sum(values)  # noqa: E731
    seeds = {step.request_seed for step in steps}
    modes = {step.decode_mode for step in steps}
    return StepTiming(
        prefill_s=sum(step.prefill_s for step in steps),
        decode_step_s=[latency for step in steps for latency in step.decode_step_s],
        batch=first.batch,
        prompt_tokens=sum(step.prompt_tokens for step in steps),
        decode_tokens=sum(step.decode_tokens for step in steps),
        decode_s=known([step.decode_s for step in steps]),
        wall_s=known([step.wall_s for step in steps]),
        ttft_s=[t for step in steps for t in step.ttft_s],
        generated_tokens=known([step.generated_tokens for step in steps]),
        request_seed=seeds.pop() if len(seeds) == 1 else None,
        token_digest=combined_digest([step.token_digest for step in steps]),
        token_count=known([step.token_count for step in steps]),
        decode_mode=modes.pop() if len(modes) == 1 else None,
    )


class Percentiles(BaseModel):
    p50: float | None
    p90: float | None
    p99: float | None


def percentiles_ms(seconds: list[float]) -> Percentiles:
    if not seconds:
        return Percentiles(p50=None, p90=None, p99=None)
    import numpy as np

    values = np.percentile(np.asarray(seconds, dtype=np.float64) * 1e3, [50, 90, 99])
    return Percentiles(p50=float(values[0]), p90=float(values[1]), p99=float(values[2]))


def _rate(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else 0.0


class RunResult(BaseModel):
    """One measured run: ``request_mixes`` request mixes back to back (see ``BenchmarkResult``)."""

    index: int
    request_mixes: int = Field(default=1, ge=1)
    wall_s: float
    prefill_s: float
    decode_s: float
    tokens_per_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    decode_step_ms: Percentiles
    decode_step_s: list[float] = Field(default_factory=list)
    """The raw decode-step latencies (seconds) behind the percentiles."""
    token_digest: str | None = None
    """The run's greedy tokens (``requests.combined_digest`` over its mixes); equal across runs of
    one deterministic workload."""
    token_count: int | None = None

    @classmethod
    def from_step(cls, index: int, step: StepTiming, request_mixes: int = 1) -> RunResult:
        wall = step.wall_time
        return cls(
            index=index,
            request_mixes=request_mixes,
            wall_s=wall,
            prefill_s=step.prefill_s,
            decode_s=step.decode_time,
            tokens_per_s=_rate(step.prompt_token_count + step.decode_token_count, wall),
            prefill_tokens_per_s=_rate(step.prompt_token_count, step.prefill_s),
            decode_tokens_per_s=_rate(step.decode_token_count, step.decode_time),
            decode_step_ms=percentiles_ms(step.decode_step_s),
            decode_step_s=list(step.decode_step_s),
            token_digest=step.token_digest,
            token_count=step.token_count,
        )


def coefficient_of_variation(values: list[float]) -> float | None:
    """Sample standard deviation / mean; None for fewer than two values."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


class CvGate(BaseModel):
    """Whether the runs agree well enough to be trusted: flagged when cv > threshold."""

    threshold: float
    exceeded: bool


class Drift(BaseModel):
    """This result against the previous run of the same workload on the same environment."""

    previous_run_id: str
    previous_tokens_per_s: float
    change: float
    """Relative change of the median tokens/s: (now - previous) / previous."""
    threshold: float
    flagged: bool


class BenchmarkResult(BaseModel):
    """One ``apex benchmark``: the workload, every run, the medians, gates and where it is stored."""

    run_id: str
    workload: WorkloadSpec
    """The resolved spec (layers, dtype and device fixed)."""
    spec_key: str
    environment: dict[str, object]
    environment_key: str
    created_at: str
    """ISO 8601, UTC."""
    warmup: int
    min_run_s: float = 0.0
    """Each run repeats the request mix until it lasts at least this long (a whole number of mixes,
    fixed by the last warm-up run so that every run does the same work)."""
    request_mixes_per_run: int = 1
    runs: list[RunResult]
    tokens_per_s: float
    """Median over runs of (prompt + decoded tokens) / wall time."""
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    latency_ms: dict[str, Percentiles]
    """prefill: over runs; decode_step: over every decode step of every run; request: wall time of the mix."""
    cv: float | None
    """Coefficient of variation of tokens/s over runs (None with one run)."""
    cv_gate: CvGate
    drift: Drift | None = None
    cached: bool = False
    """True when this result was read from an earlier run (--cache-hours) instead of measured."""
    results_dir: str
    timing_method: str
    notes: list[str] = Field(default_factory=list)
    decode_mode: DecodeMode | None = None
    """How decode ran: graph, eager_static or eager_dynamic (None: a server, which decides itself)."""
    graph_fallback: str | None = None
    """Why decode ran eagerly although the workload asked for graphs (one line; also in ``notes``),
    e.g. a patched kernel that cannot be captured; None when graphs ran or were not asked for."""


def summarize(runs: list[RunResult]) -> dict[str, object]:
    """The medians, percentiles and CV of a list of runs (fields of BenchmarkResult)."""
    tokens = [r.tokens_per_s for r in runs]
    return {
        "tokens_per_s": statistics.median(tokens),
        "prefill_tokens_per_s": statistics.median(r.prefill_tokens_per_s for r in runs),
        "decode_tokens_per_s": statistics.median(r.decode_tokens_per_s for r in runs),
        "latency_ms": {
            "prefill": percentiles_ms([r.prefill_s for r in runs]),
            "decode_step": percentiles_ms([s for r in runs for s in r.decode_step_s]),
            "request": percentiles_ms([r.wall_s for r in runs]),
        },
        "cv": coefficient_of_variation(tokens),
    }


def drift_against(previous: BenchmarkResult | None, tokens_per_s: float, threshold: float) -> Drift | None:
    if previous is None or previous.tokens_per_s <= 0:
        return None
    change = (tokens_per_s - previous.tokens_per_s) / previous.tokens_per_s
    return Drift(previous_run_id=previous.run_id, previous_tokens_per_s=previous.tokens_per_s, change=change,
                 threshold=threshold, flagged=abs(change) > threshold)
