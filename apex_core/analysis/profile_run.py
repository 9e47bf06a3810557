"""Profile a workload: its request mix under the profiler, kept in a run folder with its spec.

The run folder holds ``profile.json`` and ``trace.json`` (``profiling.store``) and
``workload.json``, the resolved spec that was profiled, so that ``identify_run`` can rebuild the
same model later to record its call shapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from apex_core.errors import ApexUserError
from apex_core.profiling import ProfileResult, capture, new_run_dir, save_profile
from apex_core.workloads import WorkloadSpec, load

WORKLOAD_FILE = "workload.json"
Progress = Callable[[float, str], None]


def profile_workload(
    spec: WorkloadSpec, results_root: Path, *, calls: int = 3, warmup: int = 1, progress: Progress | None = None
) -> tuple[ProfileResult, Path]:
    """Profile ``calls`` request mixes of ``spec`` after ``warmup`` unrecorded ones; the result and its folder."""
    report = progress or (lambda fraction, message: None)
    if calls < 1:
        raise ApexUserError(f"--calls must be at least 1, not {calls}")
    spec = spec.resolved()
    report(0.0, f"building {spec.id} ({spec.model}, {spec.layers} layers, {spec.dtype} on {spec.device})")
    workload = load(spec)
    if workload.model is None:
        workload.close()
        raise ApexUserError(
            f"workload {spec.id} runs in a {spec.stack} server, which torch.profiler cannot see into; profile the "
            "server with its own tools (rocprofv3, nsys) and read their output with apex_core.profiling.read_kernels"
        )
    try:
        run_dir = new_run_dir(results_root)
        report(0.2, f"profiling {calls} request mixes after {warmup} warm-up")
        device = "cuda" if spec.on_gpu else "cpu"
        result = capture(workload.step, calls=calls, warmup=warmup, device=device, trace_dir=run_dir)
    finally:
        workload.close()
    save_profile(result, run_dir)
    (run_dir / WORKLOAD_FILE).write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
    report(1.0, f"profile written to {run_dir}")
    return result, run_dir


def load_run_workload(run_dir: Path) -> WorkloadSpec:
    """The workload a run folder profiled, with a one-line error when the folder lacks it."""
    file = run_dir / WORKLOAD_FILE
    if not file.is_file():
        raise ApexUserError(f"no {WORKLOAD_FILE} in {run_dir}: it was not written by 'apex profile'; profile the workload again")
    try:
        return WorkloadSpec.model_validate(json.loads(file.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ApexUserError(f"{file} is not a workload spec ({str(exc).splitlines()[0]}); profile the workload again") from None
