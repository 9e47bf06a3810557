"""Detecting (and undoing) changes a solution makes to files it must not touch.

Before a grading the judge records Apex's own code (the package: grader, tasks, baselines,
references; and the MCP servers in ``servers/``) byte for byte, and the installed array and kernel
libraries and the top level of every site-packages directory (where a ``.pth`` file or a module
would run at every later Python start) by size and modification time. Afterwards any difference is
tampering. Apex's files are put back from the recorded bytes, so the next grading runs against
pristine files; a changed library cannot be put back, so the judge refuses to grade in that
environment until it is reinstalled.

A confined solution (``sandbox.py``) sees all of these read-only or not at all, so this is the
second line of defense: the first one for gradings the user ran ``--unconfined``.
"""

from __future__ import annotations

import importlib.util
import os
import site
from dataclasses import dataclass, field
from pathlib import Path

APEX_ROOT = Path(__file__).resolve().parents[1]
SERVERS_ROOT = APEX_ROOT.parent / "servers"
"""The MCP servers: the grader an agent calls is one of them."""
LIBRARIES = ("numpy", "torch", "triton")
_PROTECTED_SUFFIXES = (".py", ".toml", ".json", ".md", ".h", ".hpp", ".cuh")
"""Apex's own files a grading may not change: code, task definitions, docs, and the headers that
compile into HIP solutions (``isolation/hip_on_cuda/``: a changed header would change the next
solution's build)."""


def _library_roots() -> list[Path]:
    roots = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            roots.append(Path(spec.origin).resolve().parent)
    return roots


def _site_directories() -> list[Path]:
    """Every site-packages directory of this interpreter (its top level is watched, not its tree)."""
    found = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    return [Path(p).resolve() for p in dict.fromkeys(found) if os.path.isdir(p)]


@dataclass
class Snapshot:
    contents: dict[Path, bytes] = field(default_factory=dict)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Library files by path string (tens of thousands: plain strings keep the walk fast)."""
    site_directories: list[str] = field(default_factory=list)


def take_snapshot(
    apex_root: Path = APEX_ROOT,
    library_roots: list[Path] | None = None,
    site_directories: list[Path] | None = None,
    servers_root: Path | None = SERVERS_ROOT,
) -> Snapshot:
    snapshot = Snapshot()
    for root in [apex_root, *([servers_root] if servers_root is not None and servers_root.is_dir() else [])]:
        for path in root.rglob("*"):
            if path.suffix in _PROTECTED_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                snapshot.contents[path] = path.read_bytes()
    for root in _library_roots() if library_roots is None else library_roots:
        _stat_tree(str(root), snapshot.stats)
    for directory in _site_directories() if site_directories is None else site_directories:
        snapshot.site_directories.append(str(directory))
        _stat_top_level(str(directory), snapshot.stats)
    return snapshot


def _stat_top_level(directory: str, into: dict[str, tuple[int, int]]) -> None:
    """The files directly in ``directory``: ``.pth`` files and single-file modules. (Not the
    directory's own modification time: any import that first writes a ``__pycache__`` there
    changes it.)"""
    try:
        entries = os.scandir(directory)
    except OSError:
        return
    with entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".pyc"):
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                into[entry.path] = (stat.st_size, stat.st_mtime_ns)


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


def compare(
    before: Snapshot,
    apex_root: Path = APEX_ROOT,
    library_roots: list[Path] | None = None,
    site_directories: list[Path] | None = None,
    servers_root: Path | None = SERVERS_ROOT,
) -> Changes:
    after = take_snapshot(apex_root, library_roots, site_directories, servers_root)
    apex = sorted(
        p for p in set(before.contents) | set(after.contents) if before.contents.get(p) != after.contents.get(p)
    )
    libraries = sorted(p for p in set(before.stats) | set(after.stats) if before.stats.get(p) != after.stats.get(p))
    return Changes(apex_files=apex, library_files=libraries)


def restore(before: Snapshot, changes: Changes) -> None:
    """Put Apex's own files back as they were; remove files a solution added there or at the top
    of site-packages (a ``.pth`` file runs at every later Python start). Changed library files
    stay changed: the judge refuses to grade until they are reinstalled."""
    for path in changes.apex_files:
        if path in before.contents:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(before.contents[path])
        else:
            path.unlink(missing_ok=True)
    for name in changes.library_files:
        if name not in before.stats and os.path.dirname(name) in before.site_directories:
            try:
                os.unlink(name)
            except OSError:
                pass
