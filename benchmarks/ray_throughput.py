"""Gradings per hour against the number of GPUs: the local executor and the Ray executor side by side.

For each count N of ``--gpus`` (``--actors`` on a machine without GPUs) it grades ``--gradings``
solutions through the local executor on N devices and through the Ray executor with N grading
actors, after one unmeasured warm-up grading per device (warm pools, compile caches), and prints
and records gradings per hour, per GPU-hour, the judge's latency per grading and where each
grading ran. Every request is a fresh grading (``use_cache=False``); with ``--distinct`` every
solution differs by a comment, so each one is also compiled afresh as an RL batch's are.
It also measures what one driver can dispatch: the round trip of a request and a recorded result
through an actor that does no grading (``--round-trips``).

Run on a GPU machine (not a test), e.g. a 2 x H200 host:
``python benchmarks/ray_throughput.py --gpus 1,2 --gradings 24 --out results.json > results.txt``
(``--distinct`` for a second run). On a CPU machine, the CPU task with CPU actors:
``python benchmarks/ray_throughput.py --task cpu-mini__rms_norm --actors 1 --gradings 12``.
Figures, with machine, date and commit: docs/benchmarks.md ("Grading on Ray").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apex_core.executors import Executor, GradingRequest, SolutionContent  # noqa: E402
from apex_core.executors.local import LocalExecutor  # noqa: E402
from apex_core.executors.ray_executor import RayExecutor, connect, require_ray  # noqa: E402
from apex_core.grader import GradeCache, GradeOptions, GradeResult  # noqa: E402
from apex_core.hardware.detect import detect  # noqa: E402

GPU_TASK = "llama-3-1-8b-instruct__rms_norm"
CPU_TASK = "cpu-mini__rms_norm"
RECORDED_RESULT = ROOT / "tests" / "apex_core" / "pipeline" / "data" / "cpu-mini__rms_norm.grade.json"


def default_solution(task_id: str) -> Path:
    """The red team's honest faster Triton RMSNorm for the GPU task (as grader_bench.py), our NumPy one for the CPU task."""
    if task_id == CPU_TASK:
        return ROOT / "apex_core" / "agents" / "canned" / f"{CPU_TASK}.py"
    spec = importlib.util.spec_from_file_location("solutions", ROOT / "tests/apex_core/grader/red_team_gpu_solutions.py")
    solutions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solutions)
    return solutions.write_solution("honest_faster", Path(tempfile.mkdtemp()))


def recorded_result() -> GradeResult:
    """A real result of the CPU task (as ``apex grade --json`` wrote it): the reply a driver receives."""
    return GradeResult.model_validate(json.loads(RECORDED_RESULT.read_text())[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def requests(task_id: str, body: bytes, count: int, tag: str, distinct: bool, options: GradeOptions) -> list[GradingRequest]:
    made = []
    for number in range(count):
        content = body + (f"\n# {tag} {number} {time.time_ns()}\n".encode() if distinct else b"")
        made.append(GradingRequest(task_id=task_id, solution=SolutionContent(name="solution.py", content=content),
                                   options=options, use_cache=False))
    return made


def measure(executor: Executor, task_id: str, body: bytes, count: int, warmups: int, distinct: bool,
            options: GradeOptions, label: str) -> dict:
    """``warmups`` unmeasured gradings at once (one per device), then ``count`` timed ones through grade_many."""
    list(executor.grade_many(requests(task_id, body, warmups, f"{label} warm-up", distinct, options)))
    started = time.monotonic()
    graded = []
    for one in executor.grade_many(requests(task_id, body, count, label, distinct, options)):
        graded.append(one)
        print(f"{label}: {len(graded)}/{count} {one.result.outcome.value} {one.result.elapsed_s:.2f} s on "
              f"{one.placement.host}/{one.placement.actor} (attempt {one.placement.attempts})", flush=True)
    wall = time.monotonic() - started
    latencies = [g.result.elapsed_s for g in graded]
    return {
        "gradings": count, "wall_s": round(wall, 3), "gradings_per_hour": round(3600 * count / wall, 1),
        "judge_latency_s": {"p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95)},
        "phases_s_median": {name: statistics.median(g.result.phases_s.get(name, 0.0) for g in graded)
                            for name in sorted({n for g in graded for n in g.result.phases_s})},
        "outcomes": dict(Counter(g.result.outcome.value for g in graded)),
        "result_bytes_median": statistics.median(len(g.result.model_dump_json()) for g in graded),
        "per_actor": dict(Counter(f"{g.placement.host}/{g.placement.actor}" for g in graded)),
        "stats": executor.stats.model_dump(),
    }


def round_trips(count: int) -> dict:
    """What one driver can dispatch: a request and a recorded result through an actor that does no grading."""
    ray = require_ray()

    class Echo:
        def __init__(self, reply: str) -> None:
            self.reply = GradeResult.model_validate_json(reply)

        def grade(self, request: GradingRequest) -> GradeResult:
            return self.reply

    reply = recorded_result().model_dump_json()
    actor = ray.remote(Echo).options(num_cpus=0).remote(reply)
    sample = requests(CPU_TASK, default_solution(CPU_TASK).read_bytes(), 1, "echo", False, GradeOptions())[0]
    ray.get(actor.grade.remote(sample))
    started = time.monotonic()
    for _ in range(count):
        ray.get(actor.grade.remote(sample))
    one_by_one = (time.monotonic() - started) / count
    started = time.monotonic()
    ray.get([actor.grade.remote(sample) for _ in range(count)])
    pipelined = (time.monotonic() - started) / count
    ray.kill(actor)
    return {"calls": count, "request_bytes": len(sample.solution.content), "reply_bytes": len(reply),
            "one_by_one_ms": round(1e3 * one_by_one, 3), "pipelined_ms": round(1e3 * pipelined, 3),
            "calls_per_s_pipelined": round(1 / pipelined, 1)}


def driver_costs(task_id: str, body: bytes, cache_root: Path, count: int = 200) -> dict:
    """What the driver does per request besides the round trip: the task's hash (part of every
    cache key), a cache lookup that misses, and writing a fresh result (milliseconds each)."""
    from apex_core.grader import cache_key
    from apex_core.tasks import get_task

    cache = GradeCache(cache_root / "driver-costs")
    result = recorded_result()
    options = GradeOptions()
    started = time.monotonic()
    for _ in range(count):
        task_hash = get_task(task_id).content_hash()
    hashing = (time.monotonic() - started) / count
    keys = [cache_key(task_hash, f"{number:064x}", "0" * 16, options) for number in range(count)]
    started = time.monotonic()
    for key in keys:
        cache.get(key)
    miss = (time.monotonic() - started) / count
    started = time.monotonic()
    for key in keys:
        cache.put(key, result)
    put = (time.monotonic() - started) / count
    return {"task_hash_ms": round(1e3 * hashing, 3), "cache_miss_ms": round(1e3 * miss, 3), "cache_put_ms": round(1e3 * put, 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default=None, help=f"default: {GPU_TASK} where torch sees a GPU, else {CPU_TASK}")
    parser.add_argument("--solution", type=Path, default=None)
    parser.add_argument("--gpus", default=None, help="GPU counts to measure, e.g. 1,2 (default: 1 and every visible GPU)")
    parser.add_argument("--actors", type=int, default=1, help="without GPUs: CPU actors (the CPU's timing slot is shared)")
    parser.add_argument("--gradings", type=int, default=24, help="timed gradings per executor and count")
    parser.add_argument("--distinct", action="store_true", help="every solution different (compiled afresh)")
    parser.add_argument("--round-trips", type=int, default=200)
    parser.add_argument("--ray-address", default=None, help="an existing cluster (default: Ray started on this machine)")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-ray", action="store_true", help="the local executor alone")
    parser.add_argument("--per-device", type=int, default=1,
                        help="the local executor's gradings at once on each device (LocalExecutor.gradings_per_device)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    device = detect()
    gpus = device.device_count if device.vendor != "cpu" else 0
    task_id = args.task or (GPU_TASK if gpus else CPU_TASK)
    body = (args.solution or default_solution(task_id)).read_bytes()
    counts = [int(c) for c in args.gpus.split(",")] if args.gpus else sorted({1, gpus} if gpus else {args.actors})
    options = GradeOptions()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report: dict = {"date": date.today().isoformat(), "commit": commit, "host": platform.node(), "device": device.model_dump(),
                    "ray": None if args.skip_ray else require_ray().__version__, "task": task_id, "distinct": args.distinct, "options": options.model_dump(),
                    "counts": {}}
    cache_root = Path(tempfile.mkdtemp(prefix="apex-ray-bench-"))
    report["per_device"] = args.per_device
    if not args.skip_ray:
        connect(args.ray_address)
        report["round_trip"] = round_trips(args.round_trips)
        print(f"round trip through one actor: {json.dumps(report['round_trip'])}", flush=True)
    report["driver"] = driver_costs(task_id, body, cache_root)
    print(f"driver costs per request: {json.dumps(report['driver'])}", flush=True)
    for count in counts:
        entry: dict = {}
        if not args.skip_local and (gpus >= count or (not gpus and count == 1)):
            devices = [f"cuda:{i}" for i in range(count)] if gpus else ["cpu"]
            with LocalExecutor(cache=GradeCache(cache_root / f"local-{count}"), devices=devices,
                               gradings_per_device=args.per_device) as local:
                entry["local"] = measure(local, task_id, body, args.gradings, count * args.per_device, args.distinct, options,
                                         f"local x{count}")
        report["counts"][str(count)] = entry
        if args.skip_ray:
            continue
        with RayExecutor(cache=GradeCache(cache_root / f"ray-{count}"), max_actors=count, cpu_actors_per_node=count,
                         max_in_flight=2 * count, node_cache_dir=str(cache_root / f"node-{count}")) as on_ray:
            entry["actors"] = [a.model_dump() for a in on_ray.actors()]
            entry["ray"] = measure(on_ray, task_id, body, args.gradings, count, args.distinct, options, f"ray x{count}")
        report["counts"][str(count)] = entry
        for name in ("local", "ray"):
            if name in entry:
                figures = entry[name]
                print(f"{name} x{count}: {figures['gradings_per_hour']:.0f} gradings/hour "
                      f"({figures['gradings_per_hour'] / count:.0f} per device-hour), judge p50 {figures['judge_latency_s']['p50']:.2f} s, "
                      f"outcomes {figures['outcomes']}", flush=True)
    for count in counts:
        if "local" in report["counts"][str(count)]:
            figures = report["counts"][str(count)]["local"]
            print(f"local x{count}, {args.per_device} at once per device: {figures['gradings_per_hour']:.0f} gradings/hour, "
                  f"judge p50 {figures['judge_latency_s']['p50']:.2f} s, outcomes {figures['outcomes']}", flush=True)
    if args.skip_ray:
        if args.out:
            args.out.write_text(json.dumps(report, indent=2))
        return
    first = report["counts"][str(counts[0])]["ray"]["gradings_per_hour"] / counts[0]
    for count in counts:
        ray_figures = report["counts"][str(count)]["ray"]
        ray_figures["scaling_efficiency"] = round(ray_figures["gradings_per_hour"] / (count * first), 3)
        print(f"ray x{count}: scaling efficiency {ray_figures['scaling_efficiency']:.2f} against {counts[0]} device(s)")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
