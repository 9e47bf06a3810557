"""The identify stage, and ``apex identify``: in a profiled run, what each hot kernel is, where its
source is, which task, which shapes (``identify_run``). The stage profiles the workload first
(``apex_core.analysis.profile_run``), then chooses the top-k kernels that have a task of the asked
languages and could be integrated here; the others are named once with why.

Shapes come from the live model: after a first pass names the patchable call sites, the workload
is built again and runs one request mix under ``record_calls``, so the shapes, dtypes and strides
are the ones the model really passes (the profiler's record_shapes are kept where nothing was
recorded). The report goes to ``identify.json``, the recording to ``shapes.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from apex_core.analysis.profile_run import WORKLOAD_FILE, load_run_workload
from apex_core.errors import ApexUserError
from apex_core.identify import CallSite, IdentifiedKernel, ShapeRecording, identify, record_calls, recording_sites
from apex_core.identify.identifier import FilterStage
from apex_core.pipeline.stages.common import PROFILE_DIR, Skip, workload_spec
from apex_core.pipeline.state import KernelRecord, RunState
from apex_core.profiling import PROFILE_FILE, load_profile
from apex_core.progress import Progress, reporter
from apex_core.sources import build_index
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task
from apex_core.workloads import WorkloadSpec, load

IDENTIFY_FILE = "identify.json"
SHAPES_FILE = "shapes.json"


def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.analysis.profile_run import profile_workload

    if state.config.tasks:
        state.kernels = [_given(task_id, rank) for rank, task_id in enumerate(state.config.tasks, start=1)]
        return "the given task(s): " + ", ".join(state.config.tasks)
    report = reporter(progress)
    _, run_dir = profile_workload(workload_spec(state), state.folder / PROFILE_DIR,
                                  progress=lambda f, m: report(0.5 * f, m))
    found = identify_run(run_dir, top_k=None, progress=lambda f, m: report(0.5 + 0.5 * f, m))
    state.identify_file = str(run_dir / "identify.json")
    languages = set(state.config.languages)
    stacks = workload_spec(state).kernels
    chosen: list[KernelRecord] = []
    skipped: list[str] = []
    for kernel in found.kernels:  # ranked by device time
        if len(chosen) >= state.config.top_k:
            break
        if kernel.task_id is None or any(k.task_id == kernel.task_id for k in chosen):
            continue
        task = get_task(kernel.task_id)
        if "all" not in languages and task.language not in languages:
            skipped.append(f"{task.id} ({task.language})")
            continue
        if not kernel.patchable:
            skipped.append(f"{task.id} (not patchable: {kernel.patchable_reason})")
            continue
        if not _has_patch_point(task, stacks):
            skipped.append(f"{task.id} (no patch point in the stacks installed here: it could not be integrated)")
            continue
        chosen.append(KernelRecord(task_id=task.id, kernel=task.kernel, language=task.language, difficulty=task.difficulty,
                                   rank=kernel.rank, kernel_name=kernel.name, device_time_share=kernel.device_time_share))
    state.kernels = chosen
    skipped = list(dict.fromkeys(skipped))  # one line per task and reason, not one per profiled kernel (8 GEMMs of one task)
    if not chosen:
        raise Skip(f"none of the {len(found.kernels)} profiled kernels has a task to optimize here"
                   + (f" (left out: {', '.join(skipped)})" if skipped else ""))
    return (f"{len(chosen)} kernel(s) to optimize: "
            + ", ".join(f"{k.task_id} ({k.device_time_share:.1%})" for k in chosen)
            + (f"; left out: {', '.join(skipped)}" if skipped else ""))


def _has_patch_point(task: Task, kernel_stacks: tuple[str, ...]) -> bool:
    """Whether a winner of ``task`` could be integrated here: optimizing a kernel that no stack
    lets us patch (GPT-OSS's cuBLAS GEMMs, an MoE with no point yet) would spend the run's
    iterations on a result the model never runs."""
    from apex_core.patcher.points import point_for

    try:
        point_for(task, kernel_stacks=kernel_stacks)
    except ApexUserError:
        return False
    return True


def _given(task_id: str, rank: int) -> KernelRecord:
    task = get_task(task_id)
    return KernelRecord(task_id=task.id, kernel=task.kernel, language=task.language, difficulty=task.difficulty, rank=rank,
                        kernel_name=f"the task's baseline ({task.baseline})", device_time_share=0.0)


class IdentifyReport(BaseModel):
    """What ``apex identify`` found in one run folder."""

    results_dir: str
    workload: str
    model: str
    dtype: str
    device: str
    top_k: int | None
    recorded_sites: int
    kernels: list[IdentifiedKernel]
    task_shares: dict[str, float] = {}
    """Task id -> share of device time of every kernel of the profile that task replaces, whatever
    ``top_k`` and the filters kept: the Amdahl bound of a small kernel (a rope of 0.5%) needs it
    when ``kernels`` stops at the 10 hottest."""
    notes: list[str] = []


def latest_run(results_root: Path) -> Path:
    """The newest run folder under ``results_root`` that holds a profile of a workload."""
    runs = sorted(
        (p for p in results_root.glob("*") if (p / PROFILE_FILE).is_file() and (p / WORKLOAD_FILE).is_file()),
        key=lambda p: (p.stat().st_mtime, p.name),
    )
    if not runs:
        raise ApexUserError(f"no profiled run in {results_root}: run 'apex profile --workload ID' first, or pass --results DIR")
    return runs[-1]


def identify_run(
    run_dir: Path,
    *,
    top_k: int | None = 10,
    kernel_types: Iterable[str] | None = None,
    kinds: Iterable[str] | None = None,
    filter_stage: FilterStage = "before",
    record_shapes: bool = True,
    progress: Progress | None = None,
) -> IdentifyReport:
    """Identify the kernels of the run in ``run_dir`` and write ``identify.json`` there."""
    report = reporter(progress)
    if top_k is not None and top_k < 1:
        raise ApexUserError(f"--top-k must be at least 1, not {top_k}")
    if not run_dir.is_dir():
        raise ApexUserError(f"--results {run_dir} is not a folder; give a run folder that 'apex profile' wrote")
    profile = load_profile(run_dir)
    spec = load_run_workload(run_dir)
    report(0.05, "indexing the kernels of the installed packages")
    index = build_index()
    choose = dict(top_k=top_k, kernel_types=kernel_types, kinds=kinds, filter_stage=filter_stage)
    kernels = identify(profile.kernels, spec.model, spec.dtype, index=index, **choose)
    notes: list[str] = []
    recording: ShapeRecording | None = None
    sites = _sites(kernels)
    if record_shapes and sites:
        report(0.4, f"recording the shapes at {len(sites)} call sites of {spec.id}")
        recording = _record(spec, sites)
        (run_dir / SHAPES_FILE).write_text(recording.model_dump_json(indent=2) + "\n", encoding="utf-8")
        kernels = identify(profile.kernels, spec.model, spec.dtype, index=index, recording=recording, **choose)
    elif record_shapes:
        notes.append("no patchable call site among these kernels: shapes are the profiler's")
    every_kernel = identify(profile.kernels, spec.model, spec.dtype, index=index, recording=recording, top_k=None)
    result = IdentifyReport(
        results_dir=str(run_dir), workload=spec.id, model=spec.model, dtype=spec.dtype, device=spec.device, top_k=top_k,
        recorded_sites=len(recording.calls) if recording else 0, kernels=kernels, task_shares=_task_shares(every_kernel),
        notes=notes,
    )
    (run_dir / IDENTIFY_FILE).write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    report(1.0, f"{len(kernels)} kernels identified")
    return result


def _task_shares(kernels: Iterable[IdentifiedKernel]) -> dict[str, float]:
    shares: dict[str, float] = {}
    for kernel in kernels:
        if kernel.task_id:
            shares[kernel.task_id] = shares.get(kernel.task_id, 0.0) + kernel.device_time_share
    return shares


def _sites(kernels: list[IdentifiedKernel]) -> list[CallSite]:
    """Where to record: the patchable kernels' call sites, and the forward of every module class a
    kernel was classified by (whether that forward is the model's own code, and so patchable, is
    only known once the live model is recorded)."""
    sites = {site.key: site for site in recording_sites(kernels)}
    for kernel in kernels:
        if kernel.kind_evidence == "module" and kernel.module and kernel.kind != "other":
            sites.setdefault(kernel.module, CallSite(kind="module", target=kernel.module))
    return list(sites.values())


def _record(spec: WorkloadSpec, sites: list[CallSite]) -> ShapeRecording:
    workload = load(spec)
    try:
        if workload.model is None:
            return ShapeRecording()
        with record_calls(workload.model, sites) as recording:
            workload.step()
        return recording
    finally:
        workload.close()


def profiled_shares(spec: WorkloadSpec, results_root: Path) -> dict[str, float]:
    """Task id -> share of device time, from the newest ``apex identify`` of this workload (same
    model, kernel stacks and depth: a share depends on depth) under ``results_root``; empty when
    there is none. ``spec`` resolved."""
    found: list[tuple[float, IdentifyReport]] = []
    for path in results_root.glob(f"**/{IDENTIFY_FILE}") if results_root.is_dir() else []:
        try:
            report = IdentifyReport.model_validate_json(path.read_bytes())
            profiled = load_run_workload(path.parent)
        except (OSError, ValueError, ApexUserError):
            continue
        if (profiled.model, tuple(profiled.kernels), profiled.layers) == (spec.model, tuple(spec.kernels), spec.layers):
            found.append((path.stat().st_mtime, report))
    if not found:
        return {}
    newest = max(found, key=lambda item: item[0])[1]
    # Reports written before task_shares existed hold only the kernels top_k kept.
    return dict(newest.task_shares) or _task_shares(newest.kernels)
