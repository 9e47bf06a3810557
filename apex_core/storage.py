"""Where Apex keeps its files and how it writes them: the cache folder's rule, and a file replaced
atomically.

Every file Apex writes that another process may read at the same moment (a run's state, a grade
in the cache, the source and docs indexes' manifests, a host's MCP config, a patched module) is
written to a temporary file beside it, flushed to disk, and renamed over it: a reader sees the old
file or the new one, never half of one, and a crash leaves the old one. The temporary file is
created with O_EXCL | O_NOFOLLOW, so a link planted at its name (in a folder an agent can write)
is never written through, and its name (``.<name>.apex-<pid>-<random>.tmp``) says whose it was.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CACHE_DIR_ENV = "APEX_CACHE_DIR"


def cache_root() -> Path:
    """``$APEX_CACHE_DIR``, else ``$XDG_CACHE_HOME/apex``, else ``~/.cache/apex``: gradings, the
    signing key, compiled kernels, the knowledge base and the source index live under it."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "apex"


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable (best effort where the file system says no)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def exclusive(temporary: Path, mode: int = 0o666) -> int:
    """Create ``temporary`` for writing, never through a link or over a file someone left there:
    a name planted in a folder others can write (a symlink to a file elsewhere) is removed first,
    and O_EXCL | O_NOFOLLOW make the open fail rather than follow one planted in between."""
    try:
        os.unlink(temporary)
    except FileNotFoundError:
        pass
    return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)


def temporary_for(target: Path) -> Path:
    return target.with_name(f".{target.name}.apex-{os.getpid()}-{secrets.token_hex(3)}.tmp")


def replace_file(target: Path, write: Callable[[BinaryIO], object], *, mode: int | None = None,
                 mtime_ns: int | None = None, before_rename: Callable[[], object] | None = None, durable: bool = True) -> None:
    """Replace ``target`` with what ``write`` writes to a temporary file beside it, atomically.

    ``mode`` and ``mtime_ns`` set the new file's permission bits and modification time (a restore
    gives the original ones back); ``before_rename`` runs between the flush and the rename (the
    patcher's fault-injection point); ``durable`` fsyncs the file and its folder (a cache entry that
    can be recomputed may skip it)."""
    temporary = temporary_for(target)
    try:  # with a mode to set, made private first: a backup's bytes are never readable by others, even briefly
        with os.fdopen(exclusive(temporary, 0o600 if mode is not None else 0o666), "wb") as writer:
            write(writer)
            writer.flush()
            if durable:
                os.fsync(writer.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        if mtime_ns is not None:
            os.utime(temporary, ns=(mtime_ns, mtime_ns))
        if before_rename is not None:
            before_rename()
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(target.parent)


def atomic_write(target: Path, data: bytes, *, mode: int | None = None, mtime_ns: int | None = None,
                 before_rename: Callable[[], object] | None = None, durable: bool = True) -> None:
    """Replace ``target`` with ``data`` atomically (``replace_file``)."""
    replace_file(target, lambda writer: writer.write(data), mode=mode, mtime_ns=mtime_ns, before_rename=before_rename,
                 durable=durable)


def atomic_write_text(target: Path, text: str, *, mode: int | None = None, durable: bool = True) -> None:
    atomic_write(target, text.encode("utf-8"), mode=mode, durable=durable)
