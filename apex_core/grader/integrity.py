"""Detecting (and undoing) changes a solution makes to files it must not touch.

Before a grading the judge records Apex's own package (grader, tasks, baselines, references) byte
for byte, and the installed array and kernel libraries by size and modification time. Afterwards
any difference is tampering. Apex's files are put back from the recorded bytes, so the next
grading runs against pristine files; a changed library cannot be put back, so the judge refuses to
grade in that environment until it is reinstalled.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

APEX_ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("numpy", "torch", "triton")
_PROTECTED_SUFFIXES = (".py", ".toml", ".json", ".md")


def _library_roots() -> list[Path]:
    roots = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            roots.append(Path(spec.origin).resolve().parent)
    return roots


@dataclass
class Snapshot:
    contents: dict[Path, bytes] = field(default_factory=dict)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Library files by path string (tens of thousands: plain strings keep the walk fast)."""


def take_snapshot(apex_root: Path = APEX_ROOT, library_roots: list[Path] | None = None) -> Snapshot:
    snapshot = Snapshot()
    for path in apex_root.rglob("*"):
        if path.suffix in _PROTECTED_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
            snapshot.contents[path] = path.read_bytes()
    for root in _library_roots() if library_roots is None else library_roots:
        _stat_tree(str(root), snapshot.stats)
    return snapshot


def _stat_tree(root: str, into: dict[str, tuple[int, int]]) -> None:
    stack = [root]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    # Byte-code caches are rewritten by any process that imports the library.
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif not entry.name.endswith(".pyc"):
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    into[entry.path] = (stat.st_size, stat.st_mtime_ns)


@dataclass
class Changes:
    apex_files: list[Path]
    library_files: list[str]

    def __bool__(self) -> bool:
        return bool(self.apex_files or self.library_files)

    def describe(self, limit: int = 3) -> str:
        changed = [*self.apex_files, *self.library_files]
        shown = ", ".join(str(p) for p in changed[:limit])
        more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
        return f"modified protected files: {shown}{more}"


def compare(before: Snapshot, apex_root: Path = APEX_ROOT, library_roots: list[Path] | None = None) -> Changes:
    after = take_snapshot(apex_root, library_roots)
    apex = sorted(
        p for p in set(before.contents) | set(after.contents) if before.contents.get(p) != after.contents.get(p)
    )
    libraries = sorted(p for p in set(before.stats) | set(after.stats) if before.stats.get(p) != after.stats.get(p))
    return Changes(apex_files=apex, library_files=libraries)


def restore(before: Snapshot, changes: Changes) -> None:
    """Put Apex's own files back as they were; remove files a solution added there."""
    for path in changes.apex_files:
        if path in before.contents:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(before.contents[path])
        else:
            path.unlink(missing_ok=True)
