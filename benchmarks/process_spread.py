"""Whether the shift a GPU process puts on a short kernel's time is shared by the kernels it runs.

N fresh processes, one after another, each time the Llama RMSNorm baseline and the red team's
``honest_faster`` on the same call buffers at (4, 4096) and (256, 4096), the kernel picked at random
for every call (refill, cache flush, launch cover and events as the grader's worker does). Prints the
spread between processes of each median and of their ratio: a ratio steadier than either median
means the shift is shared, which lets ``calibration.calibrate`` correct a solution's speedup by
timing our baseline in the solution's worker. ``--stages N`` stages every shape N times in each
process, to see whether a process keeps its shift from one staging to the next.

Run on a GPU (not a test): ``python benchmarks/process_spread.py --processes 10 --out spread.json``.
Figures, and what was ruled out before: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASK = "llama-3-1-8b-instruct__rms_norm"
SHAPES = [{"tokens": 4, "hidden": 4096}, {"tokens": 256, "hidden": 4096}]
CALLS_PER_REQUEST = 32
VARIANTS = ("baseline", "faster")


def load_copies(path: str, entry_point: str, count: int) -> list[Any]:
    """``entry_point`` of ``count`` separately imported copies of the module at ``path`` (each
    Triton kernel in them is compiled once, from the disk cache, but loaded once per copy)."""
    functions = []
    for k in range(count):
        spec = importlib.util.spec_from_file_location(f"apex_copy_{k}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        functions.append(getattr(module, entry_point))
    return functions


def timed_calls(worker: Any, functions: list[Any], calls: int, flush_bytes: int, cover_ns: int,
                rng: random.Random, torch: Any) -> list[tuple[int, int, float]]:
    """(copy, ns, SM clock in GHz) of each call, timed as the worker times one call."""
    timers = worker.timers
    before = torch.cuda.Event(enable_timing=True)
    if worker.flush_buffer is None:
        worker.flush_buffer = timers.new_flush_buffer(flush_bytes)
    out = []
    for i in range(calls):
        slot = i % len(worker.buffers)
        copy = rng.randrange(len(functions))
        args = worker.buffers[slot]
        for target, source in zip(args, worker.pool[rng.randrange(len(worker.pool))]):
            if torch.is_tensor(target):
                target.copy_(source)
        timers.flush(worker.flush_buffer)
        cycles = max(1, int(cover_ns * timers.spin_cycles_per_ns))
        timers.record(before)
        timers._sleep(cycles)
        timers.record(timers.start)
        functions[copy](*args)
        timers.record(timers.end)
        timers.synchronize()
        spin_ns = before.elapsed_time(timers.start) * 1e6
        out.append((copy, round(timers.elapsed(timers.start, timers.end) * 1e6), cycles / spin_ns))
    return out


def child(rounds: int, stages: int) -> None:
    import torch

    from apex_core.grader import Worker, detected_device, launch_cover_ns, median
    from apex_core.hardware.target import spec_for_detected
    from apex_core.tasks import get_task

    task = get_task(TASK)
    spec = spec_for_detected(detected_device())
    flush_bytes = spec.cache_flush_bytes if spec else 512 * 1024**2
    worker = Worker("torch", "cuda")
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(str(task.baseline_path), task.entry_point, None, [], inputs)["ok"]
    rng = random.Random()

    solutions = load_copies(str(ROOT / "tests/apex_core/grader/red_team_gpu_solutions.py"), "write_solution", 1)[0]
    faster_path = solutions("honest_faster", Path(tempfile.mkdtemp()))
    functions = [worker.function, load_copies(str(faster_path), task.entry_point, 1)[0]]
    report: dict[str, Any] = {}
    for shape, stage in [(shape, stage) for shape in SHAPES for stage in range(stages)]:
        assert worker.stage(shape, [11 + k for k in range(8)], 8)["ok"]
        for function in functions:
            function(*worker.pool[0])
        warm = worker.warmup(10, 0.025)
        cover = launch_cover_ns(int(warm["launch_ns"]))
        samples: dict[int, list[int]] = {0: [], 1: []}
        for _ in range(rounds):
            for which, ns, _ghz in timed_calls(worker, functions, CALLS_PER_REQUEST, flush_bytes, cover, rng, torch):
                samples[which].append(ns)
        b, f = median(samples[0]), median(samples[1])
        key = f"tokens={shape['tokens']}" + (f" stage {stage + 1}" if stages > 1 else "")
        report[key] = {"cover_ns": cover, "baseline": b, "faster": f, "ratio": b / f}
    print(json.dumps(report))


def spread(values: list[float]) -> dict[str, float]:
    center = statistics.median(values)
    return {"min": min(values), "median": center, "max": max(values), "spread_pct": 100 * (max(values) - min(values)) / center}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--stages", type=int, default=1, help="stage each shape this many times in every process")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.child:
        child(args.rounds, args.stages)
        return
    results = []
    for index in range(args.processes):
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(args.rounds), "--stages", str(args.stages)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"process {index + 1} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}: {json.dumps(results[-1])}", flush=True)
    summary: dict[str, Any] = {}
    for key in results[0]:
        summary[key] = {}
        for variant in [*VARIANTS, "ratio"]:
            summary[key][variant] = spread([r[key][variant] for r in results])
            s = summary[key][variant]
            print(f"{key} {variant}: process values {s['min']:.3f}-{s['max']:.3f}, spread {s['spread_pct']:.1f}%")
    if args.out:
        args.out.write_text(json.dumps({"processes": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
