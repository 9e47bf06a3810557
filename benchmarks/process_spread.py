"""How much the process alone moves a small kernel's median, and which way of timing resists it.

The baseline graded against itself lands up to 2-3% off 1.0 at 4-7 us calls because its two
worker processes time the same kernel differently (docs/benchmarks.md). An earlier version of this
script (commit 94834c8) ruled out the cache flush and the output's address. This one starts N fresh
processes, one after another; each times the Llama RMSNorm baseline with the grader's worker
(refilled call buffers, cache flush, launch cover, events) in four ways, interleaved in rounds:

- ``per_call_8``: as the grader times short calls (one event pair per call, 8 call buffers);
  the medians of each buffer are kept too, to see whether where a buffer sits matters;
- ``per_call_64``: the same over 64 call buffers (64 placements averaged instead of 8);
- ``batch_4`` / ``batch_16``: 4 or 16 calls on distinct, refilled buffers between one event pair
  (one flush before the batch), the sample being the batch's time over its length. A fixed cost of
  the process at the start or end of the timed region is shared by the batch.

It also records each process's spin rate (the SM clock, in cycles per ns), to see whether the
processes ran at different clocks. If the spread between processes shrinks in a variant, that
variant is the way to time. Run on a GPU: ``python benchmarks/process_spread.py --processes 10``.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASK = "llama-3-1-8b-instruct__rms_norm"
SHAPES = [{"tokens": 4, "hidden": 4096}, {"tokens": 256, "hidden": 4096}]
BUFFERS = 64
CALLS_PER_REQUEST = 64
VARIANTS = {"per_call_8": (8, 1), "per_call_64": (64, 1), "batch_4": (8, 4), "batch_16": (16, 16)}
"""Variant -> (call buffers used, calls between one event pair)."""


def timed_batches(worker: Any, buffers: int, batch: int, calls: int, flush_bytes: int, cover_ns: int) -> list[tuple[int, float]]:
    """(first buffer, ns per call) of each batch, timed as the worker times one call."""
    timers = worker.timers
    if worker.flush_buffer is None:
        worker.flush_buffer = timers.new_flush_buffer(flush_bytes)
    out = []
    slot = 0
    for _ in range(calls // batch):
        first = slot
        argsets = []
        for _ in range(batch):
            argsets.append(worker._fill(slot, worker.rotation.refill(slot)))
            slot = (slot + 1) % buffers
        timers.flush(worker.flush_buffer)
        timers.cover_launch(cover_ns * batch if batch > 1 else cover_ns)
        timers.record(timers.start)
        for args in argsets:
            worker.function(*args)
        timers.record(timers.end)
        timers.synchronize()
        out.append((first, timers.elapsed(timers.start, timers.end) * 1e6 / batch))
    return out


def child(rounds: int) -> None:
    from apex_core.grader import fingerprint, stats
    from apex_core.grader.judge import launch_cover_ns
    from apex_core.grader.worker import Worker
    from apex_core.hardware.target import spec_for_detected
    from apex_core.tasks import get_task

    task = get_task(TASK)
    spec = spec_for_detected(fingerprint.detected_device())
    flush_bytes = spec.cache_flush_bytes if spec else 512 * 1024**2
    worker = Worker("torch", "cuda")
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(str(task.baseline_path), task.entry_point, None, [], inputs)["ok"]

    report: dict[str, Any] = {}
    for shape in SHAPES:
        assert worker.stage(shape, [11 + k for k in range(8)], BUFFERS)["ok"]
        warm = worker.warmup(10, 0.025)
        cover = launch_cover_ns(int(warm["launch_ns"]))
        samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
        by_buffer: dict[int, list[float]] = {}
        names = list(VARIANTS)
        for r in range(rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                buffers, batch = VARIANTS[name]
                for first, ns in timed_batches(worker, buffers, batch, CALLS_PER_REQUEST, flush_bytes, cover):
                    samples[name].append(ns)
                    if name == "per_call_8":
                        by_buffer.setdefault(first, []).append(ns)
        buffer_medians = [stats.median([round(v) for v in s]) for _, s in sorted(by_buffer.items())]
        report[f"tokens={shape['tokens']}"] = {
            "cover_ns": cover,
            "launch_ns": warm["launch_ns"],
            "spin_cycles_per_ns": worker.timers.spin_cycles_per_ns,
            "per_call_8_buffer_medians": buffer_medians,
            **{v: stats.median([round(x) for x in s]) for v, s in samples.items()},
            **{f"{v}_mean": statistics.fmean(sorted(s)[: int(0.9 * len(s))]) for v, s in samples.items()},
        }
    print(json.dumps(report))


def spread(values: list[float]) -> dict[str, float]:
    center = statistics.median(values)
    return {"min": min(values), "median": center, "max": max(values), "spread_pct": 100 * (max(values) - min(values)) / center}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.child:
        child(args.rounds)
        return
    results = []
    for index in range(args.processes):
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(args.rounds)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"process {index + 1} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}: {json.dumps(results[-1])}", flush=True)
    summary: dict[str, Any] = {}
    for key in results[0]:
        summary[key] = {}
        for variant in [*VARIANTS, *(f"{v}_mean" for v in VARIANTS)]:
            summary[key][variant] = spread([r[key][variant] for r in results])
            s = summary[key][variant]
            print(f"{key} {variant}: process values {s['min']:.0f}-{s['max']:.0f} ns, spread {s['spread_pct']:.1f}%")
        within = [spread(r[key]["per_call_8_buffer_medians"])["spread_pct"] for r in results]
        summary[key]["per_call_8_within_process_buffer_spread_pct"] = within
        print(f"{key} per_call_8: spread between the 8 buffers inside a process: {min(within):.1f}-{max(within):.1f}%")
        clocks = [r[key]["spin_cycles_per_ns"] for r in results]
        summary[key]["spin_cycles_per_ns"] = spread(clocks)
        print(f"{key} spin clock: {min(clocks):.3f}-{max(clocks):.3f} cycles/ns")
    if args.out:
        args.out.write_text(json.dumps({"processes": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
