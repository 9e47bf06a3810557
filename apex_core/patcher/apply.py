"""``apex patch apply``: put graded solutions into the installed stack, each checked in the model.

For each (task, solution): the task's patch point on this machine; the solution copied beside
the target module and the adapter appended to it, both under the journal; then, in a child
process, the patched module imported and the task's test shapes run through the model's own
module against the reference. A patch whose import, call path or outputs fail, or that crashes
or hangs the child, is rolled back alone with the reason; the others stay applied.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.patcher.check import PatchCheck, verify_in_model
from apex_core.patcher.patcher import Patcher
from apex_core.patcher.points import point_for
from apex_core.progress import Progress, reporter

CHECK_TIMEOUT_S = 600.0


class AppliedPatch(BaseModel):
    patch_id: str
    task_id: str
    solution: str
    point: str
    target: str
    applied: bool
    check: PatchCheck
    reason: str = ""
    """Why it was rolled back (empty when applied)."""


def apply_solutions(pairs: list[tuple[str, Path]], results_root: Path, *, cache_dir: Path | None = None,
                    check_timeout_s: float = CHECK_TIMEOUT_S, device: str | None = None, point_id: str | None = None,
                    progress: Progress | None = None) -> list[AppliedPatch]:
    """Patch each solution in, check it inside the model, keep it or roll it back alone."""
    from apex_core.tasks import get_task

    report = reporter(progress)
    prepared = []
    for task_id, solution in pairs:  # every argument checked before anything is touched
        task = get_task(task_id)
        path = Path(solution).expanduser().resolve()
        if not path.is_file():
            raise ApexUserError(f"--solution {solution}: no such file; give the solution you graded, e.g. output/{task_id}/solution.py")
        if path.suffix != ".py":
            raise ApexUserError(f"--solution {solution}: only Python/Triton solutions can be patched in yet; a {path.suffix} "
                                "solution needs the HIP/CUDA adapter (issue 17, not built)")
        prepared.append((task, path, point_for(task, point_id)))
    results: list[AppliedPatch] = []
    with Patcher(results_root, cache_dir=cache_dir) as patcher:
        for index, (task, path, point) in enumerate(prepared):
            report(index / len(prepared), f"patching {task.id} at {point.id}")
            target = point.target_file()
            assert target is not None  # point_for checked it
            patch_id = patcher.begin(task_id=task.id, solution=str(path))
            copy = target.parent / f"_apex_patch_{patch_id.replace('-', '_')}.py"
            adapter = point.adapter(patch_id, copy, task.entry_point, task.id)
            patcher.replace(patch_id, {copy: path.read_bytes(), target: target.read_bytes() + adapter.encode()})
            report((index + 0.5) / len(prepared), f"checking {task.id} inside the model")
            check = verify_in_model(task.id, point.id, device, check_timeout_s)
            if check.passed:
                patcher.commit(patch_id, note=f"{point.description}; {check.shapes_checked} test shapes passed in the model")
                results.append(AppliedPatch(patch_id=patch_id, task_id=task.id, solution=str(path), point=point.id,
                                            target=str(target), applied=True, check=check))
            else:
                reason = f"{check.stage} check failed: {check.message}"
                patcher.roll_back(patch_id, reason)
                results.append(AppliedPatch(patch_id=patch_id, task_id=task.id, solution=str(path), point=point.id,
                                            target=str(target), applied=False, check=check, reason=reason))
    report(1.0, f"{sum(r.applied for r in results)} of {len(results)} patch(es) applied")
    return results
