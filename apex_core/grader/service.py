"""The grading entry points the CLI and the MCP server share: several solutions, caching, ranking.

``grade_solutions`` checks every path first (so a typo fails the whole call with one clear line
before any work starts), answers from the cache where it can, grades the rest, and records
baseline medians to notice machine drift. ``compare`` ranks several solutions of one task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from queue import Empty, Queue

from pydantic import BaseModel

import apex_core
from apex_core.grader import fingerprint
from apex_core.grader.cache import GradeCache, grade_key
from apex_core.grader.judge import GradeOptions, Progress, check_solution_file, file_hash, grade
from apex_core.grader.result import GradeResult
from apex_core.tasks import get_task


def _cache_key(result_inputs: tuple[str, str, str], options: GradeOptions) -> str:
    task_hash, solution_hash, environment_key = result_inputs
    relevant = options.model_dump(exclude={"timeout_s", "device"})
    return grade_key(task_hash, solution_hash, environment_key, apex_core.__version__, relevant)


def grade_solutions(
    task_id: str,
    solutions: list[Path],
    options: GradeOptions | None = None,
    use_cache: bool = True,
    cache: GradeCache | None = None,
    progress: Progress | None = None,
) -> list[GradeResult]:
    options = options or GradeOptions()
    task = get_task(task_id)
    paths = [check_solution_file(task, Path(p)) for p in solutions]
    cache = cache or GradeCache()
    on_gpu = task.needs_gpu and _gpu_available(options)
    environment_key = fingerprint.environment(on_gpu).key()
    task_hash = task.content_hash()

    def one(number: int, path: Path, device: str | None) -> GradeResult:
        key = _cache_key((task_hash, file_hash(path), environment_key), options)
        cached = cache.get(key) if use_cache else None
        if cached is not None:
            return cached.model_copy(update={"cached": True, "solution_path": str(path)})
        local = options if device is None else options.model_copy(update={"device": device})
        result = grade(task, path, local, _scaled(progress, number, len(paths), path))
        for timing in result.timings:
            shape_key = ",".join(f"{k}={v}" for k, v in timing.shape.items())
            drift = cache.check_baseline(result.provenance.task_hash, result.provenance.environment_key, shape_key,
                                         timing.baseline_median_ns)
            if drift:
                result.flags.append(drift)
        if use_cache:
            cache.put(key, result)
        return result

    devices = visible_gpus(options) if on_gpu else []
    return run_per_device([(i, p) for i, p in enumerate(paths)], devices, one)


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
