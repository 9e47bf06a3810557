"""Holding exactly a set of patches: each bound to its solution file's sha256, and the environment
made to hold that set and nothing else (everything restored, then each applied at its point).

The accuracy gate holds the patched arm's set, then halves of it; the final benchmark
(``apex_core.pipeline.stages.final.arms``) holds each of its arms in turn. Every solution is bound
to its sha256 when the gate or the benchmark starts: a set is never built from a file that changed
since (an agent's process editing its winner mid-benchmark changes nothing measured).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.grader import file_hash
from apex_core.patcher.journal import PatchRecord


class ArmPatch(BaseModel):
    """One patch of a set (an arm): the task, its solution file, the point, the file's sha256."""

    task_id: str
    solution: str
    point: str | None = None
    sha256: str


def bound_patch(task_id: str, solution: Path, point: str | None) -> ArmPatch:
    if not solution.is_file():
        raise ApexUserError(f"{task_id}: its solution {solution} is gone; nothing was measured")
    return ArmPatch(task_id=task_id, solution=str(solution), point=point, sha256=file_hash(solution))


def checked_when_applied(records: list[PatchRecord], unconfined: bool) -> set[tuple[str, str, str]]:
    """(task, sha256, point) of each applied patch whose in-model check passed, as the journal
    records it, confined (or either way when ``unconfined``): putting exactly those bytes back at that
    point need not check them again. A journal from before the record kept hashes vouches for none."""
    modes = {"confined", "unconfined"} if unconfined else {"confined"}
    return {(r.task_id, r.sha256, r.point) for r in records
            if r.state == "applied" and r.task_id and r.sha256 and r.point and r.checked in modes}


def hold(patches: list[ArmPatch], results_root: Path, checked: set[tuple[str, str, str]], *,
         unconfined: bool = False, owned: bool = True, during: str = "the final benchmark") -> None:
    """Make the environment hold exactly ``patches``: everything restored, then each applied at its
    point. A (task, file, point) already checked inside the model in this benchmark is not checked
    again; a file whose sha256 moved since the benchmark began is refused. ``owned``: the patches
    are this process's own, so a benchmark killed between arms leaves none behind (the next apex
    command rolls them back); the accuracy gate, which leaves the user's patches in place, keeps
    them as they were. ``during``: what is measuring, as the refusals name it.

    From one set of patches to another, where the patched code ran confined, the session stays
    open: its patches are rolled back from the journal and the next set applied, against the
    snapshot the session began with. A confined child sees site-packages read-only, so between two
    sets nothing but this process wrote there, and the journal alone undoes what it wrote; the full
    restore (a walk of the environment against its snapshot, then a new snapshot: seconds on a
    large venv) comes when the holding ends, or at every set where the code ran unconfined and may
    have written anywhere."""
    from apex_core.patcher.apply import apply_solutions
    from apex_core.patcher.patcher import restore, status

    journal = status()
    swapping = bool(patches) and not unconfined and journal is not None and bool(journal.active())
    if not swapping:
        restore()
    if not patches:
        return
    for patch in patches:
        path = Path(patch.solution)
        if not path.is_file() or file_hash(path) != patch.sha256:
            raise ApexUserError(f"{patch.task_id}: {patch.solution} changed during {during}; nothing was measured")
    applied = apply_solutions([(p.task_id, Path(p.solution)) for p in patches], results_root,
                              points={p.task_id: p.point for p in patches if p.point}, unconfined=unconfined,
                              already_checked=frozenset(checked), owned=owned, replacing=swapping)
    moved = [r for r, p in zip(applied, patches) if r.sha256 != p.sha256]
    if moved:
        raise ApexUserError(f"{moved[0].task_id}: {moved[0].solution} changed during {during}; nothing was measured")
    failed = [r for r in applied if not r.applied]
    if failed:
        raise ApexUserError(f"{failed[0].task_id} no longer passes inside the model ({failed[0].reason}); nothing was measured")
    checked.update((r.task_id, r.sha256, r.point) for r in applied)
