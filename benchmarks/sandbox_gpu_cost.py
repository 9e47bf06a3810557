"""What confinement costs on a GPU machine: confined against unconfined, alternating (not a test).

1. Device work in a bare process under the reaper: import torch, CUDA context, 64 MB device-to-host
   copies into pageable memory, a pinned allocation, 200 small copies, 2000 kernel launches, and
   RLIMIT_MEMLOCK as the process sees it (only root ignores it: the sandbox user does not).
2. Whole gradings of the Llama RMSNorm task (its baseline, or a red-team solution), with their phases.
3. The files in the candidate's compile cache before and after each grading: a confined worker
   compiles in a copy in its scratch that is copied back when it closes, so it stops growing after
   the first grading.

Run: ``python benchmarks/sandbox_gpu_cost.py [--solution honest_faster] [--gradings 3] [--skip-device-work]``.
Figures, with machine, date and commit: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apex_core.grader import sandbox, worker_environment  # noqa: E402

DEVICE_WORK = r'''
import os, resource, time
started = time.perf_counter(); import torch; imported = time.perf_counter() - started
print("uid", os.getuid(), "memlock", resource.getrlimit(resource.RLIMIT_MEMLOCK), "import_s", round(imported, 2))
started = time.perf_counter(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
print("context_s", round(time.perf_counter() - started, 3))
big, host = torch.randn(16 << 20, device="cuda"), torch.empty(16 << 20)
copies = []
for _ in range(5):
    torch.cuda.synchronize(); started = time.perf_counter(); host.copy_(big); torch.cuda.synchronize()
    copies.append(round((time.perf_counter() - started) * 1e3, 2))
print("d2h_64MB_pageable_ms", copies)
started = time.perf_counter(); torch.empty(16 << 20, pin_memory=True); print("pinned_64MB_alloc_ms", round((time.perf_counter() - started) * 1e3, 2))
small, small_host = torch.empty(16384, device="cuda"), torch.empty(16384)
torch.cuda.synchronize(); started = time.perf_counter()
for _ in range(200): small_host.copy_(small)
torch.cuda.synchronize(); print("small_d2h_x200_ms", round((time.perf_counter() - started) * 1e3, 2))
torch.cuda.synchronize(); started = time.perf_counter()
for _ in range(2000): big.add_(1)
torch.cuda.synchronize(); print("launches_x2000_ms", round((time.perf_counter() - started) * 1e3, 2))
'''


def device_work(confined: bool) -> str:
    scratch = Path(tempfile.mkdtemp(prefix="apex-gpu-cost-"))
    identity = sandbox.candidate_identity()
    if confined and identity is not None:
        os.chown(scratch, *identity)
    config = {"scratch": str(scratch), "confine": {"writable": [], "tmp_bytes": 1 << 28} if confined else None}
    done = subprocess.run(
        [sys.executable, "-s", "-m", "apex_core.grader.isolation.reaper", json.dumps(config), "--", sys.executable, "-s", "-c", DEVICE_WORK],
        cwd=scratch, env=worker_environment(scratch), capture_output=True, text=True, check=False,
    )
    subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return done.stdout.strip().replace("\n", " | ") or done.stderr[-500:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradings", type=int, default=3)
    parser.add_argument("--solution", default="baseline",
                        help="'baseline' (the task's own file), or a red-team solution's name, e.g. honest_faster")
    parser.add_argument("--skip-device-work", action="store_true")
    args = parser.parse_args()
    if not args.skip_device_work:
        for confined in (True, False, True, False):
            print("device work", "confined  " if confined else "unconfined", device_work(confined), flush=True)

    from apex_core.grader import GradeOptions, Grading, default_cache_dir, grade
    from apex_core.tasks import get_task

    task = get_task("llama-3-1-8b-instruct__rms_norm")
    solution = task.baseline_path
    if args.solution != "baseline":
        import importlib.util

        source = Path(__file__).resolve().parents[1] / "tests/apex_core/grader/red_team_gpu_solutions.py"
        spec = importlib.util.spec_from_file_location("red_team_gpu_solutions", source)
        assert spec is not None and spec.loader is not None
        solutions = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(solutions)
        solution = solutions.write_solution(args.solution, Path(tempfile.mkdtemp()))
    # Alternating, so that drift in the machine falls on both alike; the candidate's compile cache
    # is counted before and after each grading (it should stop growing after the first).
    for index in range(args.gradings):
        for unconfined in (False, True):
            options = GradeOptions(unconfined=unconfined, time_budget_s=0.3)
            cache = Grading(task, solution, options).candidate_cache()
            before = sum(len(names) for _, _, names in os.walk(cache))
            started = time.monotonic()
            result = grade(task, solution, options)
            after = sum(len(names) for _, _, names in os.walk(cache))
            print("grading", "unconfined" if unconfined else "confined  ", index, result.outcome.value,
                  round(time.monotonic() - started, 2), f"cache {before}->{after} files", json.dumps(result.phases_s),
                  flush=True)
    for root in (Path(tempfile.gettempdir()) / "apex-compile", default_cache_dir() / "compile"):
        for entry in sorted(root.iterdir()) if root.is_dir() else []:
            files = sum(len(names) for _, _, names in os.walk(entry))
            print("candidate compile cache", entry, files, "files")


if __name__ == "__main__":
    main()
