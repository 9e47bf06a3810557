"""File operations that survive a crash at any instant: hashes, durable copies, atomic replacement.

A replacement is written to a temporary file in the target's own folder, flushed to disk, and
renamed over the target (rename within one file system is atomic), then the folder is flushed
so the rename itself is durable. At every instant the target holds either its old bytes or its
new ones, never a torn mix, which is what lets the journal restore it after a kill -9 or a power
loss. Restores also put back the mode and modification time, so Python's bytecode cache (keyed
by the source's mtime and size) sees the original file again.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, PlainSerializer

from apex_core.storage import atomic_write, fsync_dir, replace_file

__all__ = ["FileState", "NanoTimestamp", "atomic_write", "bytecode_files", "durable_copy", "durable_unlink", "file_state",
           "fsync_dir", "sha256_bytes", "sha256_file", "stray_temporaries"]

NanoTimestamp = Annotated[int, PlainSerializer(str, return_type=str, when_used="json")]
"""A file time in nanoseconds since the epoch. Today's are near 1.8e18, past the 2**53 a JSON reader
that keeps numbers as doubles holds exactly (JavaScript's: the Inspector, Claude Code), so JSON carries
it as a decimal string; reading takes the string or a number."""


class FileState(BaseModel):
    """What a file was: enough to check and to restore it byte for byte."""

    exists: bool
    sha256: str | None = None
    size: int | None = None
    mode: int | None = None
    mtime_ns: NanoTimestamp | None = None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_state(path: Path) -> FileState:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return FileState(exists=False)
    return FileState(exists=True, sha256=sha256_file(path), size=stat.st_size, mode=stat.st_mode & 0o7777,
                     mtime_ns=stat.st_mtime_ns)


def durable_copy(source: Path, target: Path, *, mode: int | None = None) -> None:
    """Copy bytes and flush them; the copy becomes visible under ``target`` only when complete
    (with ``mode`` as its permission bits when given: backups are 0600)."""
    with source.open("rb") as reader:
        replace_file(target, lambda writer: shutil.copyfileobj(reader, writer), mode=mode)


def durable_unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def bytecode_files(source: Path) -> list[Path]:
    """The ``__pycache__`` files Python compiled from ``source`` (any interpreter, any optimization)."""
    cache = source.parent / "__pycache__"
    if source.suffix != ".py" or not cache.is_dir():
        return []
    return sorted(cache.glob(f"{source.stem}.*.pyc"))


def stray_temporaries(folder: Path) -> list[Path]:
    """Temporary files an interrupted replacement may have left in ``folder``."""
    return sorted(folder.glob(".*.apex-*.tmp"))
