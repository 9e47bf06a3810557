"""Profile a workload: its request mix under the profiler, kept in a run folder with its spec.

The run folder holds ``profile.json`` and ``trace.json`` (``profiling.store``) and
``workload.json``, the resolved spec that was profiled, so that ``identify_run`` (the identify
stage, ``apex_core.pipeline.stages.identify``) can rebuild the same model later to record its call
shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from apex_core.errors import ApexUserError
from apex_core.progress import Progress, reporter
from apex_core.profiling import KernelRecord, ProfileResult, new_run_dir, save_profile
from apex_core.workloads import WorkloadSpec, customize, load
from apex_core.workloads.runner import PROFILED_WORKLOAD_FILE as WORKLOAD_FILE


def profile_workload(
    spec: WorkloadSpec, results_root: Path, *, calls: int = 3, warmup: int = 1, progress: Progress | None = None
) -> tuple[ProfileResult, Path]:
    """Profile ``calls`` request mixes of ``spec`` after ``warmup`` unrecorded ones; the result and its folder.
    Decode runs eagerly here whatever ``spec`` asks (the shares of device time are those of the
    kernels a graph would replay)."""
    from apex_core.patcher.original import refuse_if_patched
    from apex_core.profiling import capture  # PyTorch: only where a workload is profiled here

    report = reporter(progress)
    if calls < 1:
        raise ApexUserError(f"--calls must be at least 1, not {calls}")
    refuse_if_patched("a profile")  # its shares bound every later credit: they must be the original's
    # Decode eagerly over the same static cache: a graph replays the same kernels, but under a graph
    # the profiler cannot tell which op launched one, and identify needs that to name its source.
    spec = customize(spec, graphs=False).resolved() if spec.stack == "transformers" else spec.resolved()
    report(0.0, spec.loading_message())
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
        result = capture(workload.step, calls=calls, warmup=warmup, device=spec.device, trace_dir=run_dir)
    finally:
        workload.close()
    save_profile(result, run_dir)
    (run_dir / WORKLOAD_FILE).write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
    report(1.0, f"profile written to {run_dir}")
    return result, run_dir


class ProfileSummary(BaseModel):
    """What ``apex profile`` and the profiler server report: where the run is and its hottest kernels."""

    results_dir: str = Field(description="Pass this to the identifier's identify_kernels.")
    trace: str | None = Field(description="Chrome trace of the profiled calls (opens in Perfetto).")
    workload: str
    device: str
    device_name: str
    total_time_us: float
    overhead: float | None = Field(description="Profiled over unprofiled wall time, minus 1.")
    kernel_count: int
    kernels: list[KernelRecord] = Field(description="The hottest kernels (device kernels on a GPU, CPU ops by module on the CPU).")

    def title(self) -> str:
        """The table's title: how many of the kernels it shows (never more than there are)."""
        return f"{self.workload} on {self.device_name}: top {len(self.kernels)} of {self.kernel_count} ({self.results_dir})"

    @classmethod
    def of(cls, result: ProfileResult, run_dir: Path, workload: str, top: int) -> ProfileSummary:
        return cls(
            results_dir=str(run_dir.resolve()), trace=str(Path(result.trace_path).resolve()) if result.trace_path else None,
            workload=workload, device=result.device, device_name=result.device_name, total_time_us=result.total_time_us,
            overhead=result.overhead, kernel_count=len(result.kernels), kernels=result.top(top),
        )


def load_run_workload(run_dir: Path) -> WorkloadSpec:
    """The workload a run folder profiled, with a one-line error when the folder lacks it."""
    file = run_dir / WORKLOAD_FILE
    if not file.is_file():
        raise ApexUserError(f"no {WORKLOAD_FILE} in {run_dir}: it was not written by 'apex profile'; profile the workload again")
    try:
        return WorkloadSpec.model_validate(json.loads(file.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ApexUserError(f"{file} is not a workload spec ({str(exc).splitlines()[0]}); profile the workload again") from None
