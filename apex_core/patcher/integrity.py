"""Changes to the patch points' files that no journal accounts for.

The journal is how the patcher knows what it changed. A patched file it does not know about (a
journal lost with its results folder, a copy of a patched environment, a hand edit) is found
here by comparing each installed point's module with the hash its distribution's RECORD holds,
and by the adapter copies (``_apex_patch_*``) beside it. ``apex patch status`` reports them, so an
environment never runs patched code while saying it does not.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
from pathlib import Path

from apex_core.patcher.journal import Journal
from apex_core.patcher.points import POINTS

COPY_PREFIX = "_apex_patch_"


def _recorded_hash(target: Path, module: str) -> str | None:
    """sha256 of ``target`` as its distribution installed it (RECORD), or None when unknown."""
    from apex_core.sources.packages import distributions_of

    for name in distributions_of(module.split(".", 1)[0]):
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for packaged in files:
            if packaged.hash is None or packaged.hash.mode != "sha256" or not str(packaged).endswith(target.name):
                continue
            if Path(str(packaged.locate())).resolve() == target:
                return base64.urlsafe_b64decode(packaged.hash.value + "=" * (-len(packaged.hash.value) % 4)).hex()
    return None


def unaccounted_changes(journal: Journal | None) -> list[str]:
    """One line per point file that differs from its installed state, or adapter copy, that the
    live journal does not list."""
    journaled = {entry.target for entry in journal.entries} if journal is not None and journal.active() else set()
    found: list[str] = []
    seen: set[Path] = set()
    for point in POINTS:
        try:
            target = point.target_file()
        except Exception:  # noqa: BLE001 - a compiled target has no file to check
            continue
        if target is None or target in seen:
            continue
        seen.add(target)
        if str(target) not in journaled:
            recorded = _recorded_hash(target, point.module)
            if recorded is not None and hashlib.sha256(target.read_bytes()).hexdigest() != recorded:
                found.append(f"{target} differs from what its package installed, and no patch journal lists it")
        for copy in sorted(target.parent.glob(f"{COPY_PREFIX}*")):
            if str(copy) not in journaled:
                found.append(f"{copy} is a patch's solution copy that no patch journal lists")
    return found
