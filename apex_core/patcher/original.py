"""A measurement of the original stack is taken only where nothing is patched.

``apex benchmark``, ``apex profile`` and the first stages of ``apex run`` measure the stack a
kernel must beat. Taken with patches in place, that baseline is someone's solutions: a later
speedup is then measured against them, and a benchmark result keyed like an unpatched one is
reused from the cache and drift-compared as if it were. A run that died leaves no such patches
(the next apex command's recovery undoes what a dead run applied for itself); what remains was
applied on purpose (``apex patch apply``, ``apex integrate``) or belongs to a live run. Either
way the measurement is refused in one line, unless the user asks for the patched stack on
purpose, and then its result is keyed apart (``patched_environment``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.patcher.journal import PatchRecord
from apex_core.patcher.patcher import status


def applied_patches(cache_dir: Path | None = None, roots: Iterable[Path] | None = None) -> list[PatchRecord]:
    """The patches in place in this environment now (none when no journal is live)."""
    journal = status(cache_dir, roots)
    return journal.active() if journal is not None else []


def refuse_if_patched(what: str, *, how_on_purpose: str | None = None, cache_dir: Path | None = None,
                      roots: Iterable[Path] | None = None) -> None:
    """One line when patches are in place: ``what`` would take them for the original stack."""
    patches = applied_patches(cache_dir, roots)
    if not patches:
        return
    named = ", ".join(p.task_id or p.id for p in patches[:3]) + (f" and {len(patches) - 3} more" if len(patches) > 3 else "")
    on_purpose = f", or {how_on_purpose}" if how_on_purpose else ""
    raise ApexUserError(
        f"{len(patches)} patch(es) are in place in this environment ({named}): {what} would take them for the original "
        f"stack; restore them first ('apex patch restore', or the restore_patches tool; patch status shows them){on_purpose}"
    )


def patched_environment(cache_dir: Path | None = None, roots: Iterable[Path] | None = None) -> dict[str, str]:
    """What keys a measurement of the patched stack apart from the original's: each patch's task
    and the sha256 of the bytes patched in, else the patch's own id (empty when nothing is patched)."""
    patches = applied_patches(cache_dir, roots)
    if not patches:
        return {}
    return {"patched": ",".join(sorted(f"{p.task_id or p.id}@{p.sha256[:16] if p.sha256 else p.id}" for p in patches))}
