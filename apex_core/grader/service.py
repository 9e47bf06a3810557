"""The grading entry points the CLI and the MCP server share: several solutions, caching, ranking.

``grade_solutions`` checks every path first (so a typo fails the whole call with one clear line
before any work starts), answers from the cache where it can, grades the rest, and records
baseline medians to notice machine drift. ``compare`` ranks several solutions of one task.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import Empty, Queue

from pydantic import BaseModel

import apex_core
from apex_core.grader import fingerprint
from apex_core.grader.cache import GradeCache, grade_key
from apex_core.grader.devices import grading_device
from apex_core.grader.judge import grade
from apex_core.grader.ledger import GradingLedger
from apex_core.grader.options import GradeOptions
from apex_core.grader.result import GradeResult
from apex_core.grader.solution_file import check_solution_file, file_hash, solution_paths
from apex_core.progress import Progress
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task

log = logging.getLogger(__name__)

MAX_STEP_TIMEOUT_S = 3600.0
"""The longest a single step of a solution may be given (``--timeout``, the tools' ``timeout_s``)."""
HEARTBEAT_S = 5.0
"""While one step of a grading runs longer than this, its progress message is repeated (with its age)."""
NOT_IN_CACHE_KEY = frozenset({"timeout_s", "device", "warm_pool"})
"""Options that do not change what a grading measures: how long a step may take, which GPU of
the same kind, whether workers come from the warm pool. The CLI and the MCP tools differ in these
(a one-shot command does not keep workers warm), and must still find each other's verdicts."""


def cache_key(task_hash: str, solution_hash: str, environment_key: str, options: GradeOptions) -> str:
    """One key for one file graded with the same measuring options, whoever asked (CLI or tool)."""
    relevant = options.model_dump(exclude=set(NOT_IN_CACHE_KEY))
    return grade_key(task_hash, solution_hash, environment_key, apex_core.__version__, relevant)


def grade_solutions(
    task_id: str,
    solutions: list[Path],
    options: GradeOptions | None = None,
    use_cache: bool = True,
    cache: GradeCache | None = None,
    progress: Progress | None = None,
    heartbeat_s: float = HEARTBEAT_S,
) -> list[GradeResult]:
    """Grade ``solutions`` of one task (answered from ``cache`` where this exact file was graded
    with the same measuring options before); ``progress(fraction, message)`` never goes backwards
    and, during a long step, keeps coming every ``heartbeat_s`` seconds."""
    options = options or GradeOptions()
    task = get_task(task_id)
    paths = [check_solution_file(task, p) for p in solution_paths(task, [Path(p) for p in solutions])]
    grading_device(task, options.device)  # a device that does not exist fails before any cached verdict is given
    cache = cache or GradeCache()
    on_gpu = task.needs_gpu and _gpu_available(options)
    environment_key = environment_key_for(task, options)
    task_hash = task.content_hash()
    steady = SteadyProgress(progress, heartbeat_s) if progress is not None else None

    def one(number: int, path: Path, device: str | None) -> GradeResult:
        local = options if device is None else options.model_copy(update={"device": device})
        return grade_cached(task, path, local, cache, use_cache, environment_key, task_hash,
                            _scaled(steady, number, len(paths), path))

    devices = visible_gpus(options) if on_gpu else []
    if steady is None:
        return run_per_device([(i, p) for i, p in enumerate(paths)], devices, one)
    with steady:
        return run_per_device([(i, p) for i, p in enumerate(paths)], devices, one)


def grade_cached(
    task: Task, path: Path, options: GradeOptions, cache: GradeCache, use_cache: bool, environment_key: str,
    task_hash: str, progress: Progress | None = None,
) -> GradeResult:
    """One file graded, or answered from ``cache`` when this exact file was graded here with the
    same measuring options; a fresh grading records its baseline medians (drift) and is cached.
    Either way the grading, as handed out, is recorded signed in the judge's ledger beside the
    cache (``ledger.py``), which integration and the patcher's tools check gradings against.

    The one place a grading meets the caches: ``grade_solutions`` calls it per file, and so does
    each grading actor of the Ray executor (``apex_core.executors``) on its own node."""
    key = cache_key(task_hash, file_hash(path), environment_key, options)
    cached = cache.get(key) if use_cache else None
    if cached is not None:
        result = cached.model_copy(update={"cached": True, "solution_path": str(path)})
        GradingLedger(cache.root).record(result)
        return result
    result = grade(task, path, options, progress)
    for timing in result.timings:
        shape_key = ",".join(f"{k}={v}" for k, v in timing.shape.items())
        drift = cache.check_baseline(result.provenance.task_hash, result.provenance.environment_key, shape_key,
                                     timing.baseline_median_ns)
        if drift:
            result.flags.append(drift)
    if use_cache:
        cache.put(key, result)
    GradingLedger(cache.root).record(result)
    return result


def environment_key_for(task: Task, options: GradeOptions) -> str:
    """The fingerprint key a grading of ``task`` with ``options`` is cached under on this machine."""
    return fingerprint.environment(task.needs_gpu and _gpu_available(options)).key()


class SteadyProgress:
    """Progress as a client can rely on it: it never goes backwards (MCP requires each report to
    be larger than the last, and a re-measured timing starts its shapes over), and while one step
    runs long (loading and compiling, one case in Triton's interpreter) the last message is
    repeated every ``interval_s`` with how long it has been running, a little further on."""

    STEP = 0.001
    """The smallest advance a report shows (0.1%)."""

    def __init__(self, report: Progress, interval_s: float = HEARTBEAT_S) -> None:
        self.report = report
        self.interval_s = interval_s
        self.fraction = -1.0
        self.message = ""
        self.since = self.sent_at = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._beat = threading.Thread(target=self._beats, name="apex-progress", daemon=True)

    def __call__(self, fraction: float, message: str) -> None:
        with self._lock:
            self.message, self.since = message, time.monotonic()
            self._send(fraction, message)

    def _send(self, fraction: float, message: str) -> None:
        fraction = min(max(fraction, self.fraction + self.STEP), 1.0)
        if fraction <= self.fraction:
            return  # at the end already: nothing further to show
        self.fraction, self.sent_at = fraction, time.monotonic()
        self.report(fraction, message)

    def _beats(self) -> None:
        while not self._done.wait(self._until_next()):
            with self._lock:
                now = time.monotonic()
                # Heartbeats stop short of the end: the step they repeat has not finished.
                if not self.message or now - self.sent_at < self.interval_s or self.fraction + self.STEP >= 0.99:
                    continue
                try:
                    self._send(self.fraction + self.STEP, f"{self.message} (still running, {now - self.since:.0f} s)")
                except Exception:  # a client that went away must not end the grading
                    log.warning("a progress report failed; no more heartbeats for this grading", exc_info=True)
                    return

    def _until_next(self) -> float:
        due = self.sent_at + self.interval_s - time.monotonic()
        return due if due > 0 else self.interval_s  # overdue only when a beat was skipped

    def __enter__(self) -> SteadyProgress:
        self._beat.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._beat.join(timeout=self.interval_s + 5)


def visible_gpus(options: GradeOptions) -> list[str]:
    """The GPUs gradings may spread over: the one asked for, else every visible one."""
    if options.device:
        return [options.device]
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def run_per_device(
    jobs: list[tuple[int, Path]], devices: list[str], work: Callable[[int, Path, str | None], GradeResult]
) -> list[GradeResult]:
    """Run jobs one at a time per device, devices in parallel; results in the jobs' order."""
    if len(devices) <= 1 or len(jobs) <= 1:
        device = devices[0] if devices else None
        return [work(number, path, device) for number, path in jobs]
    queue: Queue[tuple[int, Path]] = Queue()
    for job in jobs:
        queue.put(job)
    results: dict[int, GradeResult] = {}
    errors: list[BaseException] = []

    def drain(device: str) -> None:
        while not errors:
            try:
                number, path = queue.get_nowait()
            except Empty:
                return
            try:
                results[number] = work(number, path, device)
            except BaseException as error:  # re-raised in the caller's thread below
                errors.append(error)

    threads = [threading.Thread(target=drain, args=(device,), name=f"apex-grade-{device}") for device in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [results[number] for number, _ in jobs]


def _scaled(progress: Progress | None, number: int, count: int, path: Path) -> Progress | None:
    """Progress of one solution mapped into the whole call's range."""
    if progress is None:
        return None
    prefix = f"{path.name} ({number + 1} of {count}): " if count > 1 else ""
    return lambda fraction, message: progress((number + fraction) / count, prefix + message)


def _gpu_available(options: GradeOptions) -> bool:
    if options.device:
        return options.device != "cpu"
    import torch

    return bool(torch.cuda.is_available())


class Ranked(BaseModel):
    rank: int
    solution_path: str
    outcome: str
    correct: bool
    speedup: float | None
    score: float
    rl_reward: float | None


def rank(results: list[GradeResult]) -> list[Ranked]:
    """Best first: correct before incorrect, then by credited speedup, then by score."""
    ordered = sorted(results, key=lambda r: (not r.correct, -(r.speedup or 0.0), -r.score.total))
    return [
        Ranked(rank=i + 1, solution_path=r.solution_path, outcome=r.outcome.value, correct=r.correct,
               speedup=r.speedup, score=r.score.total, rl_reward=r.rl_reward)
        for i, r in enumerate(ordered)
    ]
