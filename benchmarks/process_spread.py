"""How much the process alone moves a small kernel's median, and what might cause it.

The baseline graded against itself lands up to 2-3% off 1.0 at 4-7 us calls because its two
worker processes time the same kernel differently (docs/benchmarks.md). This script starts N
fresh processes, one after another; each times the Llama RMSNorm baseline with the grader's own
worker loop (``Worker.time_samples``: rotating refilled call buffers, cache flush, launch cover,
events) under three variants, interleaved in rounds:

- ``grader``: exactly as the grader times;
- ``no_flush``: without the cache flush;
- ``moved_output``: a spacer of random size is allocated before each call, so that the kernel's
  output (allocated by the wrapper, normally the same block every call) lands somewhere else.

If the spread between processes shrinks in a variant, that variant's difference is the cause.
Run on a GPU: ``python benchmarks/process_spread.py --processes 8``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASK = "llama-3-1-8b-instruct__rms_norm"
SHAPES = [{"tokens": 4, "hidden": 4096}, {"tokens": 256, "hidden": 4096}]
VARIANTS = ("grader", "no_flush", "moved_output")


def child(rounds: int, reps: int) -> None:
    import torch

    from apex_core.grader.judge import launch_cover_ns
    from apex_core.grader.worker import Worker
    from apex_core.hardware.target import spec_for_detected
    from apex_core.grader import fingerprint
    from apex_core.tasks import get_task

    task = get_task(TASK)
    spec = spec_for_detected(fingerprint.detected_device())
    flush_bytes = spec.cache_flush_bytes if spec else 512 * 1024**2
    worker = Worker("torch", "cuda")
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(str(task.baseline_path), task.entry_point, None, [], inputs)["ok"]
    plain = worker.function
    rng = random.Random(os.getpid())

    def moved(*args):
        spacer = torch.empty(rng.randrange(1, 512) * 4096, dtype=torch.uint8, device="cuda")
        result = plain(*args)
        del spacer
        return result

    report = {}
    for shape in SHAPES:
        assert worker.stage(shape, [11 + k for k in range(8)], 8)["ok"]
        warm = worker.warmup(10, 0.025)
        cover = launch_cover_ns(int(warm["launch_ns"]))
        samples: dict[str, list[int]] = {v: [] for v in VARIANTS}
        for r in range(rounds):
            order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
            for variant in order:
                worker.function = moved if variant == "moved_output" else plain
                flush = 0 if variant == "no_flush" else flush_bytes
                reply = worker.time_samples(reps, flush, cover)
                assert reply["ok"], reply
                samples[variant].extend(reply["samples_ns"])
        worker.function = plain
        report[f"tokens={shape['tokens']}"] = {
            "cover_ns": cover,
            "launch_ns": warm["launch_ns"],
            **{v: statistics.median(s) for v, s in samples.items()},
        }
    print(json.dumps(report))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--reps", type=int, default=32)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.child:
        child(args.rounds, args.reps)
        return
    results = []
    for index in range(args.processes):
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(args.rounds), "--reps", str(args.reps)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"process {index + 1} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}: {results[-1]}", flush=True)
    summary = {}
    for key in results[0]:
        summary[key] = {}
        for variant in VARIANTS:
            medians = [r[key][variant] for r in results]
            center = statistics.median(medians)
            summary[key][variant] = {"min": min(medians), "median": center, "max": max(medians),
                                     "spread_pct": 100 * (max(medians) - min(medians)) / center}
            print(f"{key} {variant}: process medians {min(medians):.0f}-{max(medians):.0f} ns, "
                  f"spread {summary[key][variant]['spread_pct']:.1f}%")
    if args.out:
        args.out.write_text(json.dumps({"processes": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
