"""The grading entry points the CLI and the MCP server share: several solutions, caching, ranking.

``grade_solutions`` checks every path first (so a typo fails the whole call with one clear line
before any work starts), answers from the cache where it can, grades the rest, and records
baseline medians to notice machine drift. ``compare`` ranks several solutions of one task.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel

import apex_core
from apex_core.grader import fingerprint
from apex_core.grader.cache import GradeCache, grade_key
from apex_core.grader.judge import GradeOptions, Progress, check_solution_file, grade
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
    results = []
    for number, path in enumerate(paths):
        key = _cache_key((task.content_hash(), hashlib.sha256(path.read_bytes()).hexdigest(), environment_key), options)
        cached = cache.get(key) if use_cache else None
        if cached is not None:
            results.append(cached.model_copy(update={"cached": True, "solution_path": str(path)}))
            continue
        result = grade(task, path, options, _scaled(progress, number, len(paths), path))
        for timing in result.timings:
            shape_key = ",".join(f"{k}={v}" for k, v in timing.shape.items())
            drift = cache.check_baseline(result.provenance.task_hash, result.provenance.environment_key, shape_key,
                                         timing.baseline_median_ns)
            if drift:
                result.flags.append(drift)
        if use_cache:
            cache.put(key, result)
        results.append(result)
    return results


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
