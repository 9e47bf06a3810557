"""The identify stage: profile the workload, identify its kernels, and choose the top-k that have a
task of the asked languages and could be integrated here; the others are named once with why."""

from __future__ import annotations

from apex_core.errors import ApexUserError
from apex_core.pipeline.stages.common import PROFILE_DIR, Skip, workload_spec
from apex_core.pipeline.state import KernelRecord, RunState
from apex_core.progress import Progress, reporter
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task

def run(state: RunState, progress: Progress | None) -> str:
    from apex_core.analysis.identify_run import identify_run
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
