"""``apex patch apply``: put graded solutions into the installed stack, each checked in the model.

For each (task, solution): the task's patch point on this machine; the solution copied beside
the target module (a HIP/CUDA/C++ solution first built, in a confined child process, into the
shared library that is copied instead) and the adapter appended to it, both under the journal; then,
in a child process confined as a grading worker is (``apex_core.grader.isolation.confined``), the patched
module imported and the task's test shapes run through the model's own module against the
reference. A patch whose import, call path or outputs fail, or that crashes or hangs the child, is
rolled back alone with the reason; the others stay applied. ``unconfined`` (``--unconfined``) runs
those children with the user's rights instead, only where the user asked for it; each patch's
journal note records it.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.patcher.check import PatchCheck, verify_in_model
from apex_core.patcher.library import build_library
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
    sha256: str = ""
    """Of the solution's bytes as they were patched in (read once: what was checked is what runs)."""
    applied: bool
    check: PatchCheck
    reason: str = ""
    """Why it was rolled back (empty when applied)."""


def apply_solutions(pairs: list[tuple[str, Path]], results_root: Path, *, cache_dir: Path | None = None,
                    check_timeout_s: float = CHECK_TIMEOUT_S, device: str | None = None, points: dict[str, str] | None = None,
                    kernel_stacks: tuple[str, ...] = (), unconfined: bool = False,
                    already_checked: frozenset[tuple[str, str, str]] = frozenset(), owned: bool = False,
                    graded_sha256: dict[str, str] | None = None, replacing: bool = False,
                    progress: Progress | None = None) -> list[AppliedPatch]:
    """Patch each solution in, check it inside the model, keep it or roll it back alone.
    ``points``: task id -> the patch point to use; other tasks get the first installed point,
    those of ``kernel_stacks`` (the workload's ``--kernels``) first. ``already_checked``: (task id,
    solution sha256, point id) whose check inside the model passed earlier in this process (the
    final benchmark re-applies the same files for each arm); those are not checked again. ``owned``:
    the patches are this process's (a pipeline run, a final benchmark's arm), rolled back by the
    next apex command once it is gone, however it ended; otherwise they stay until apex patch restore.
    ``graded_sha256``: task id -> the sha256 its grading was of (integrate, MCP apply_patch): bytes
    read here that differ (the file changed after the grading was verified) are not patched in.
    ``replacing``: the session's active patches are rolled back first, inside it (``hold``)."""
    from apex_core.grader import COMPILED_SUFFIXES, require_confinement
    from apex_core.tasks import get_task

    report = reporter(progress)
    prepared = []
    for task_id, solution in pairs:  # every argument checked before anything is touched
        task = get_task(task_id)
        path = Path(solution).expanduser().resolve()
        if not path.is_file():
            raise ApexUserError(f"--solution {solution}: no such file; give the solution you graded, e.g. output/{task_id}/solution.py")
        expected = Path(task.solution_filename).suffix
        if path.suffix != expected and not (path.suffix in COMPILED_SUFFIXES and expected in COMPILED_SUFFIXES):
            raise ApexUserError(f"--solution {solution}: {task.id} takes a {expected} solution ({task.solution_filename}), "
                                f"not a {path.suffix} file")
        prepared.append((task, path, point_for(task, (points or {}).get(task.id), kernel_stacks)))
    require_confinement("check patched solutions inside the model", unconfined)
    results: list[AppliedPatch] = []
    with Patcher(results_root, cache_dir=cache_dir, owned=owned) as patcher:
        if replacing:
            patcher.roll_back_all("rolled back: another set of patches took its place")
        for index, (task, path, point) in enumerate(prepared):
            report(index / len(prepared), f"patching {task.id} at {point.id}")
            target = point.target_file()
            assert target is not None  # point_for checked it
            patch_id = patcher.begin(task_id=task.id, solution=str(path), point=point.id)
            source = path.read_bytes()
            outcome = AppliedPatch(patch_id=patch_id, task_id=task.id, solution=str(path), point=point.id, target=str(target),
                                   sha256=hashlib.sha256(source).hexdigest(), applied=False,
                                   check=PatchCheck(passed=False, stage="build"))
            expected = (graded_sha256 or {}).get(task.id)
            if expected is not None and outcome.sha256 != expected:
                outcome.check.message = outcome.reason = (f"{path} changed after its grading was verified (sha256 "
                                                          f"{outcome.sha256[:12]}, graded {expected[:12]}): grade it again")
                patcher.roll_back(patch_id, outcome.reason)
                results.append(outcome)
                continue
            stem = target.parent / f"_apex_patch_{patch_id.replace('-', '_')}"
            if path.suffix in COMPILED_SUFFIXES:
                report((index + 0.2) / len(prepared), f"building {path.name} into a shared library")
                with tempfile.TemporaryDirectory(prefix="apex-patch-build-") as build_dir:
                    copied = Path(build_dir) / "source" / path.name
                    copied.parent.mkdir()
                    copied.write_bytes(source)
                    built = build_library(copied, Path(build_dir), unconfined=unconfined)
                    payload = Path(built.library).read_bytes() if built.ok else b""
                if not built.ok:
                    outcome.check.message, outcome.reason = built.message, f"build failed: {built.message}"
                    patcher.roll_back(patch_id, outcome.reason)
                    results.append(outcome)
                    continue
                copy = stem.with_suffix(".so")
                adapter = point.adapter(patch_id, copy, task.entry_point, task.id, library_module=built.module_name)
            else:
                copy, payload = stem.with_suffix(".py"), source
                adapter = point.adapter(patch_id, copy, task.entry_point, task.id)
            patcher.replace(patch_id, {copy: payload, target: target.read_bytes() + adapter.encode()})
            if (task.id, outcome.sha256, point.id) in already_checked:
                outcome.check = PatchCheck(passed=True, stage="correctness", message="checked earlier in this session")
            else:
                report((index + 0.5) / len(prepared), f"checking {task.id} inside the model")
                outcome.check = verify_in_model(task.id, point.id, device, check_timeout_s, unconfined=unconfined)
            if outcome.check.passed:
                how = " (checked UNCONFINED, as asked)" if unconfined else ""
                patcher.commit(patch_id, note=f"{point.description}; {outcome.check.shapes_checked} test shapes passed in the model{how}",
                               sha256=outcome.sha256, checked="unconfined" if unconfined else "confined")
                outcome.applied = True
            else:
                outcome.reason = f"{outcome.check.stage} check failed: {outcome.check.message}"
                patcher.roll_back(patch_id, outcome.reason)
            results.append(outcome)
    report(1.0, f"{sum(r.applied for r in results)} of {len(results)} patch(es) applied")
    return results
