"""What confinement (apex_core/grader/isolation/sandbox.py) adds to starting a worker.

Two measurements, alternating confined and unconfined starts so that drift in the machine's load
falls on both alike:

- ``spawn``: ``sandbox.spawn`` of ``/bin/true`` from this (single-threaded) process, until it has
  exited and been collected: namespaces, the mount view, the pivot, the exec, and the tear-down.
- ``worker``: a whole ``WorkerProcess`` start (reaper, worker, ``import numpy``, the init reply),
  as a grading pays it; closed after each start.

Run: ``.venv/bin/python benchmarks/sandbox_start.py [--rounds 20]``. Prints medians and quartiles
in milliseconds. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.grader import PACKAGE_PARENT, WorkerProcess, WorkerSpec, become_subreaper, sandbox  # noqa: E402


def spawn_ms(confined: bool) -> float:
    scratch = tempfile.mkdtemp(prefix="apex-bench-")
    identity = sandbox.candidate_identity()
    if identity is not None:
        os.chown(scratch, *identity)
    started = time.perf_counter()
    view = sandbox.worker_view(scratch, PACKAGE_PARENT) if confined else None
    pid = sandbox.spawn(["/bin/true"], (), lambda: None, view, scratch)
    os.waitpid(pid, 0)
    elapsed = (time.perf_counter() - started) * 1e3
    os.rmdir(scratch)
    return elapsed


def worker_ms(confined: bool) -> float:
    started = time.perf_counter()
    worker = WorkerProcess(WorkerSpec(library="numpy", device="cpu", unconfined=not confined), timeout_s=60)
    elapsed = (time.perf_counter() - started) * 1e3
    worker.close()
    return elapsed


def summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values):7.1f} ms  (quartiles {q[0]:.1f}-{q[2]:.1f}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    become_subreaper()  # as the reaper is: a confined worker is re-parented to its caller
    for name, measure in (("spawn", spawn_ms), ("worker", worker_ms)):
        times: dict[bool, list[float]] = {True: [], False: []}
        for index in range(args.rounds):
            for confined in ((True, False) if index % 2 == 0 else (False, True)):
                times[confined].append(measure(confined))
        extra = statistics.median(times[True]) - statistics.median(times[False])
        print(f"{name:7s} confined   {summary(times[True])}")
        print(f"{name:7s} unconfined {summary(times[False])}")
        print(f"{name:7s} confinement adds {extra:.1f} ms (difference of medians)")


if __name__ == "__main__":
    main()
