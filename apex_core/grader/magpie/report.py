"""Reading Magpie's compare report as hostile data: strict types, bounded sizes, consistent samples."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from apex_core.grader.magpie.errors import KNOWN_LATENCY_METHODS, LatencyMethod, MagpieError, Role, StageState, one_line
from apex_core.grader.magpie.run import REPORT_NAME
from apex_core.grader.magpie.workspace import MagpieEntry

MAX_SAMPLES = 100_000
MAX_LATENCY_MS = 3_600_000.0
"""One hour: a stated latency above this is not a measurement."""
MEDIAN_AGREEMENT = 1e-6
"""Relative slack between a stated wall-clock median and the median of its own samples."""


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ValueError(f"must be a number, got {type(value).__name__} {shown}")  # noqa: TRY004 (pydantic needs ValueError)
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("is a number too large to be a float") from None
    if math.isnan(number):
        raise ValueError("is NaN, not a number")
    if math.isinf(number):
        raise ValueError("is infinite")
    return number


def _latency_ms(value: Any) -> float:
    number = _finite(value)
    if not 0.0 < number <= MAX_LATENCY_MS:
        raise ValueError(f"must be a latency above 0 and at most {MAX_LATENCY_MS:g} ms, got {number:g}")
    return number


def _non_negative(value: Any) -> float:
    number = _finite(value)
    if not 0.0 <= number <= MAX_LATENCY_MS:
        raise ValueError(f"must be between 0 and {MAX_LATENCY_MS:g}, got {number:g}")
    return number


def _finite_or_none(value: Any) -> float | None:
    return None if value is None else _finite(value)


def _text(value: Any) -> str:
    """Free text from the report (error messages): any JSON value, flattened, clipped; never run."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)[:2000]
    return one_line(text, 400)


LatencyMs = Annotated[float, BeforeValidator(_latency_ms)]
NonNegativeMs = Annotated[float, BeforeValidator(_non_negative)]
FiniteNumber = Annotated[float | None, BeforeValidator(_finite_or_none)]
Text = Annotated[str, BeforeValidator(_text)]
Count = Annotated[StrictInt, Field(ge=0, le=10**9)]


class _Report(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ReportStats(_Report):
    """Magpie's ``LatencyStats`` (milliseconds)."""

    median_ms: LatencyMs
    samples_ms: list[LatencyMs] = Field(default_factory=list, max_length=MAX_SAMPLES)
    p50_ms: NonNegativeMs | None = None
    p99_ms: NonNegativeMs | None = None
    min_ms: NonNegativeMs | None = None
    max_ms: NonNegativeMs | None = None
    std_ms: NonNegativeMs | None = None
    n_repeat: Count = 0
    n_retries: Count = 0
    estimate_ms: NonNegativeMs | None = None


class ReportLatency(_Report):
    """Magpie's ``LatencyResult.to_dict()``."""

    success: StrictBool
    method: StrictStr
    primary_metric: StrictStr | None = None
    primary_value_ms: FiniteNumber = None
    wall_stats: ReportStats | None = None
    kernel_stats: ReportStats | None = None
    dispatch_overhead_us: FiniteNumber = None
    crosscheck_vs_rocprof_ratio: FiniteNumber = None
    crosscheck_warning: Text = ""
    errors: Text = ""


class ReportStageResult(_Report):
    success: StrictBool = False
    errors: Text = ""


class ReportExtra(_Report):
    kernel_id: StrictStr
    kernel_type: StrictStr | None = None


class ReportKernel(_Report):
    """Magpie's ``EvaluationState.to_dict()`` for one kernel entry."""

    compiling_state: StageState
    correctness_state: StageState
    performance_state: StageState
    latency_state: StageState | None = None
    """Absent in reports of a Magpie without the Latency stage."""
    errors: list[Text] = Field(default_factory=list, max_length=1000)
    compiling_result: ReportStageResult | None = None
    correctness_result: ReportStageResult | None = None
    latency_result: ReportLatency | None = None
    extra: ReportExtra


class ReportResults(_Report):
    kernel_results: list[ReportKernel] = Field(max_length=4096)


class CompareReport(_Report):
    """``compare_report.json``; Magpie's winner, rankings and scores are deliberately not read."""

    mode: Literal["compare"]
    timestamp: StrictStr
    results: ReportResults


class MagpieKernelResult(BaseModel):
    """What Magpie reported for one entry, in nanoseconds, after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    role: Role
    shape_index: int
    shape: dict[str, int]
    compiling_state: StageState
    correctness_state: StageState
    latency_state: StageState | None
    method: str | None
    """The latency method Magpie states it used."""
    median_ns: float | None
    """The headline for the requested metric: the median of the wall-clock samples (checked
    against Magpie's stated median), or Magpie's kernel-only median."""
    samples_ns: list[float]
    wall_median_ns: float | None
    kernel_median_ns: float | None
    errors: str


class MagpieReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    timestamp: str
    kernels: list[MagpieKernelResult]


def _validation_reason(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (+{error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return f"{REPORT_NAME}: {where}: {message}{more}"


def _stats_ns(stats: ReportStats | None, where: str, check_median: bool) -> tuple[float | None, list[float]]:
    if stats is None:
        return None, []
    samples = list(stats.samples_ms)
    if stats.n_retries and samples and stats.n_retries != len(samples):
        raise MagpieError("malformed_report", f"{REPORT_NAME}: {where}: n_retries is {stats.n_retries} but {len(samples)} samples are listed")
    median_ms = stats.median_ms
    if check_median and samples:
        own = statistics.median(samples)
        if abs(own - stats.median_ms) > MEDIAN_AGREEMENT * max(own, stats.median_ms):
            raise MagpieError(
                "malformed_report",
                f"{REPORT_NAME}: {where}: the stated median {stats.median_ms:g} ms is not the median of its samples ({own:g} ms)",
            )
        median_ms = own
    return median_ms * 1e6, [s * 1e6 for s in samples]


def parse_compare_report(
    raw: bytes | str,
    entries: Sequence[MagpieEntry],
    method: LatencyMethod,
    path: str = REPORT_NAME,
) -> MagpieReport:
    """Validate a compare report as hostile data and pair its kernels with the configured entries.

    Failures of the report itself (undecodable, wrong types, NaN/negative/huge latencies, other
    kernels than configured) raise ``MagpieError('malformed_report')``; failures Magpie reports
    for a kernel are kept in the result for ``timing_from_report`` to judge.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        data = json.loads(text)
    except UnicodeDecodeError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is not UTF-8 text") from None
    except RecursionError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is nested too deeply to be a report") from None
    except ValueError as exc:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MagpieError("malformed_report", f"{REPORT_NAME} holds a JSON {type(data).__name__}, not an object")
    try:
        report = CompareReport.model_validate(data)
    except ValidationError as exc:
        raise MagpieError("malformed_report", _validation_reason(exc)) from None
    except RecursionError:
        raise MagpieError("malformed_report", f"{REPORT_NAME} is nested too deeply to be a report") from None

    found = [kernel.extra.kernel_id for kernel in report.results.kernel_results]
    expected = [entry.id for entry in entries]
    if found != expected:
        shown = ", ".join(found[:8]) + (" ..." if len(found) > 8 else "")
        raise MagpieError(
            "malformed_report",
            f"{REPORT_NAME} lists kernels [{shown}] but Apex configured [{', '.join(expected)}] in that order",
        )

    kernels = []
    for index, (entry, kernel) in enumerate(zip(entries, report.results.kernel_results)):
        where = f"results.kernel_results[{index}].latency_result"
        latency = kernel.latency_result
        stated = latency.method if latency is not None else None
        if stated is not None and stated not in KNOWN_LATENCY_METHODS:
            raise MagpieError("malformed_report", f"{REPORT_NAME}: {where}.method: {one_line(stated, 40)!r} is no Magpie latency method")
        wall_ns, wall_samples = _stats_ns(latency.wall_stats if latency else None, f"{where}.wall_stats", check_median=True)
        kernel_ns, kernel_samples = _stats_ns(latency.kernel_stats if latency else None, f"{where}.kernel_stats", check_median=False)
        wall_metric = method == "cuda_graph"
        errors = [*kernel.errors]
        for stage in (kernel.compiling_result, kernel.correctness_result):
            if stage is not None and stage.errors and stage.errors not in errors:
                errors.append(stage.errors)
        if latency is not None and latency.errors and latency.errors not in " ".join(errors):
            errors.append(latency.errors)
        kernels.append(
            MagpieKernelResult(
                id=entry.id,
                role=entry.role,
                shape_index=entry.shape_index,
                shape=entry.shape,
                compiling_state=kernel.compiling_state,
                correctness_state=kernel.correctness_state,
                latency_state=kernel.latency_state,
                method=stated,
                median_ns=wall_ns if wall_metric else kernel_ns,
                samples_ns=wall_samples if wall_metric else kernel_samples,
                wall_median_ns=wall_ns,
                kernel_median_ns=kernel_ns,
                errors=one_line(" ;; ".join(e for e in errors if e), 400),
            )
        )
    return MagpieReport(path=path, timestamp=report.timestamp, kernels=kernels)
