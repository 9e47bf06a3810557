"""``benchmark``: warm up, measure N runs, summarize, gate, compare with the last run, store.

Results live in ``<results root>/<run-id>/benchmark.json`` (root: ``--results-dir``, default
``results/`` in the current folder). The root is also the cache and the history: a run whose
(workload spec, environment) keys match is reused within ``cache_hours``, and the latest measured
one is what the drift check compares with. The environment is the grader's fingerprint (device,
driver, runtime, Python, packages) with the inference packages added, plus any ``environment_extra``
a caller names (the patcher: which patches are applied), so a patched stack never reuses or
drifts against an unpatched result.
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib.metadata
import json
import math
import secrets
from pathlib import Path
from typing import Protocol

from apex_core.errors import ApexUserError
from apex_core.progress import Progress, reporter
from apex_core.workloads.results import (
    BenchmarkResult,
    CvGate,
    RunResult,
    StepTiming,
    drift_against,
    merge_steps,
    summarize,
)
from apex_core.workloads.spec import WorkloadSpec

DEFAULT_RUNS = 5
DEFAULT_WARMUP = 2
"""Two: the first also compiles and autotunes (Triton, cuBLAS heuristics); the second, warm, sizes the runs."""
DEFAULT_MIN_RUN_S = 0.0
"""By default a run is one request mix. ``--min-run-s`` repeats the mix until a run lasts that
long (for mixes so short that the clock's granularity matters); measured on 2026-12-01 it did not
lower the CV of the defaults (docs/benchmarks.md, "Workloads"): their variance is slow drift of
the machine over seconds, which longer runs catch more of, not jitter within a run."""
MAX_MIXES_PER_RUN = 1000
DEFAULT_MAX_CV = 0.05
DEFAULT_DRIFT = 0.05
RESULT_FILE = "benchmark.json"
PROFILED_WORKLOAD_FILE = "workload.json"
"""What ``apex profile`` writes beside a run's profile: the workload as it resolved it."""
WORKLOAD_PACKAGES = ("transformers", "liger-kernel", "flash-linear-attention", "fla-core", "vllm", "sglang")


class Workload(Protocol):
    """What ``load`` returns for any stack.

    ``step(seed)`` runs one request mix with prompts drawn from the request seed (None: the spec's
    seed); ``decode_mode`` says how decode runs and ``graph_fallback`` why graphs, asked for, are
    not used (both None for a server).
    """

    spec: WorkloadSpec
    model: object
    notes: list[str]
    timing_method: str
    decode_mode: str | None
    graph_fallback: str | None

    def step(self, seed: int | None = None) -> StepTiming: ...

    def close(self) -> None: ...


def load(spec: WorkloadSpec, patched: list[tuple[str, str]] = ()) -> Workload:
    """Build or start a workload (resolved first): ``.model``, ``.spec``, ``.step()``, ``.close()``.
    ``patched``: for a server in a container, the patched files to mount (``serving.load_server``);
    an embedded workload imports this environment's files as they are."""
    spec = spec.resolved()
    if spec.stack == "transformers":
        from apex_core.workloads.embedded import load_embedded

        return load_embedded(spec)
    from apex_core.workloads.serving import load_server

    return load_server(spec, patched=patched)


def preflight(spec: WorkloadSpec) -> None:
    """Refuse, in one line and before any work, a (resolved) workload this machine cannot run."""
    if spec.stack == "transformers":
        from apex_core.workloads.embedded import preflight_embedded

        preflight_embedded(spec)
    else:
        from apex_core.workloads.serving import preflight_server

        preflight_server(spec)


def default_results_root() -> Path:
    return Path.cwd() / "results"


def workload_environment(spec: WorkloadSpec, extra: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    """The environment fingerprint of a (resolved) workload, and its key."""
    from apex_core.grader import environment

    env = environment(spec.on_gpu)
    packages = dict(env.packages)
    for name in WORKLOAD_PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    for name, value in (extra or {}).items():
        packages[f"extra:{name}"] = value
    env = env.model_copy(update={"packages": packages})
    return env.model_dump(), env.key()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _new_run_id(spec: WorkloadSpec, when: dt.datetime) -> str:
    return f"{when.strftime('%Y%m%d-%H%M%S')}-{spec.id}-{secrets.token_hex(3)}"


def stored_results(root: Path) -> list[BenchmarkResult]:
    """Every readable benchmark result under ``root``, oldest first (unreadable files skipped)."""
    found: list[BenchmarkResult] = []
    if not root.is_dir():
        return found
    for path in root.glob(f"*/{RESULT_FILE}"):
        try:
            found.append(BenchmarkResult.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda r: r.created_at)


def last_measured(workload_id: str, root: Path) -> tuple[WorkloadSpec, BenchmarkResult | None] | None:
    """The workload as the newest ``apex benchmark`` or ``apex profile`` of it under ``root``
    resolved it (depth, kernel stacks, dtype), with that benchmark when a benchmark is the newer;
    None when neither ran. A profile counts because the kernels a user goes on to patch, the shares
    that bound their credit and the model the final benchmark measures must all be the one profiled."""
    benchmarked = [r for r in stored_results(root) if r.workload.id == workload_id]
    newest: tuple[dt.datetime, WorkloadSpec, BenchmarkResult | None] | None = None
    if benchmarked:
        newest = (dt.datetime.fromisoformat(benchmarked[-1].created_at), benchmarked[-1].workload, benchmarked[-1])
    for path in root.glob(f"**/{PROFILED_WORKLOAD_FILE}") if root.is_dir() else []:
        try:
            spec = WorkloadSpec.model_validate_json(path.read_bytes())
            when = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
        except (OSError, ValueError):
            continue
        if spec.id == workload_id and (newest is None or when > newest[0]):
            # A profile decodes eagerly whatever was asked (its shares are a graph's kernels, named):
            # its ``graphs: false`` is the profiler's, not the workload's. Measured with it, an 8-layer
            # Llama on an H200 wandered by 23% between rounds (2026-12-04); graphs decide as by default.
            newest = (when, spec.model_copy(update={"graphs": None}), None)
    return None if newest is None else (newest[1], newest[2])


def _matching(root: Path, spec_key: str, environment_key: str) -> list[BenchmarkResult]:
    return [r for r in stored_results(root) if r.spec_key == spec_key and r.environment_key == environment_key]


def cached_result(root: Path, spec_key: str, environment_key: str, hours: float, now: dt.datetime | None = None) -> BenchmarkResult | None:
    """The newest stored result of this workload and environment no older than ``hours``."""
    if hours <= 0:
        return None
    now = now or _now()
    for result in reversed(_matching(root, spec_key, environment_key)):
        age = now - dt.datetime.fromisoformat(result.created_at)
        if age <= dt.timedelta(hours=hours):
            return result
    return None


def check_options(runs: int, warmup: int, cache_hours: float, max_cv: float, min_run_s: float = DEFAULT_MIN_RUN_S) -> None:
    if runs < 1:
        raise ApexUserError(f"--runs {runs}: give 1 or more measured runs ({DEFAULT_RUNS} by default)")
    if warmup < 0:
        raise ApexUserError(f"--warmup {warmup}: give 0 or more warm-up runs ({DEFAULT_WARMUP} by default)")
    if not cache_hours >= 0:
        raise ApexUserError(f"--cache-hours {cache_hours:g}: give 0 (measure again) or more hours")
    if not max_cv > 0:
        raise ApexUserError(f"--max-cv {max_cv:g}: give a fraction above 0, e.g. 0.05 for 5%")
    if not 0 <= min_run_s <= 600:
        raise ApexUserError(f"--min-run-s {min_run_s:g}: give 0 (one request mix per run) to 600 seconds "
                            f"({DEFAULT_MIN_RUN_S:g} by default)")


def mixes_per_run(warmup_wall_s: float | None, min_run_s: float) -> int:
    """How many request mixes make a run of at least ``min_run_s``, judged by the last warm-up run."""
    if warmup_wall_s is None or min_run_s <= 0 or warmup_wall_s <= 0:
        return 1
    return max(1, min(MAX_MIXES_PER_RUN, math.ceil(min_run_s / warmup_wall_s)))


def measure_run(loaded: Workload, index: int, mixes: int) -> RunResult:
    """``mixes`` request mixes back to back with the garbage collector paused, as one run.

    Collecting first and pausing the collector keeps a collection from landing inside one run and
    not another (pyperf does the same); the workload's own allocations are unaffected.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        steps = [loaded.step() for _ in range(mixes)]
    finally:
        if was_enabled:
            gc.enable()
    return RunResult.from_step(index, merge_steps(steps), request_mixes=mixes)


def benchmark(
    spec: WorkloadSpec,
    runs: int = DEFAULT_RUNS,
    *,
    warmup: int = DEFAULT_WARMUP,
    cache_hours: float = 0.0,
    results_dir: Path | str | None = None,
    max_cv: float = DEFAULT_MAX_CV,
    min_run_s: float = DEFAULT_MIN_RUN_S,
    drift_threshold: float = DEFAULT_DRIFT,
    environment_extra: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> BenchmarkResult:
    """Measure a workload end to end: ``warmup`` unmeasured steps, then ``runs`` measured ones.

    Returns a stored result instead when one of the same workload and environment is younger than
    ``cache_hours`` (``cached`` is then true). The CV gate only flags (``cv_gate.exceeded``); the
    caller decides whether that fails (``apex benchmark --fail-on-cv``). A run repeats the request
    mix until it lasts ``min_run_s`` (``mixes_per_run``; one mix when there is no warm-up).
    """
    check_options(runs, warmup, cache_hours, max_cv, min_run_s)
    report = reporter(progress)
    spec = spec.resolved()
    preflight(spec)
    root = Path(results_dir) if results_dir is not None else default_results_root()
    environment, environment_key = workload_environment(spec, environment_extra)
    spec_key = spec.key()
    hit = cached_result(root, spec_key, environment_key, cache_hours)
    if hit is not None:
        report(1.0, f"cached result {hit.run_id} ({hit.created_at})")
        return hit.model_copy(update={"cached": True})
    history = _matching(root, spec_key, environment_key)
    previous = history[-1] if history else None

    report(0.0, spec.loading_message())
    loaded = load(spec)
    measured: list[RunResult] = []
    try:
        total = warmup + runs
        last_warmup_s: float | None = None
        for index in range(warmup):
            report(index / total, f"warm-up {index + 1}/{warmup}")
            last_warmup_s = loaded.step().wall_time
        mixes = mixes_per_run(last_warmup_s, min_run_s)
        for index in range(runs):
            report((warmup + index) / total, f"run {index + 1}/{runs}" + (f" ({mixes} request mixes)" if mixes > 1 else ""))
            measured.append(measure_run(loaded, index, mixes))
        notes, timing_method = list(loaded.notes), loaded.timing_method
        decode_mode, graph_fallback = getattr(loaded, "decode_mode", None), getattr(loaded, "graph_fallback", None)
    finally:
        loaded.close()

    created = _now()
    run_id = _new_run_id(spec, created)
    folder = root / run_id
    summary = summarize(measured)
    cv = summary["cv"]
    result = BenchmarkResult(
        run_id=run_id,
        workload=spec,
        spec_key=spec_key,
        environment=environment,
        environment_key=environment_key,
        created_at=created.isoformat(),
        warmup=warmup,
        min_run_s=min_run_s,
        request_mixes_per_run=mixes,
        runs=measured,
        cv_gate=CvGate(threshold=max_cv, exceeded=cv is not None and cv > max_cv),  # type: ignore[operator]
        drift=drift_against(previous, summary["tokens_per_s"], drift_threshold),  # type: ignore[arg-type]
        results_dir=str(folder),
        timing_method=timing_method,
        notes=notes,
        decode_mode=decode_mode,
        graph_fallback=graph_fallback,
        **summary,  # type: ignore[arg-type]
    )
    write_result(result, folder)
    if graph_fallback:
        report(1.0, f"graphs fell back to eager decode: {graph_fallback}")
    report(1.0, f"{result.tokens_per_s:,.0f} tokens/s, cv {_percent(cv)}; {folder / RESULT_FILE}")
    return result


def write_result(result: BenchmarkResult, folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / RESULT_FILE
        path.write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise ApexUserError(f"--results-dir {folder.parent}: cannot write there ({error.strerror}); "
                            "give a folder you can write") from None
    return path


def _percent(value: object) -> str:
    return f"{100 * value:.2f}%" if isinstance(value, float) else "n/a"
