"""Reading a file of an indexed tree only where it really lies inside that tree.

Why: a package or a checkout may hold a symbolic link (a ``.py`` file linked to ``~/.ssh/id_rsa``,
a folder linked to ``/``), and the source explorer must not become a way to read what it points
at (docs/sources.md, "Limits, on purpose"). A path's text says nothing about where it leads, and
resolving it before opening leaves a moment in which a folder on the way can be swapped for a
link. So a file is opened first, and its real location is then read from the open descriptor
(``/proc/self/fd/N`` on Linux), which no later swap can change; only a file whose real location is
inside the tree is read. A file that is not a regular file is refused the same way: a FIFO named
``x.py`` would otherwise block its reader, and with it a server, for ever.

Standard library only: the search's child process (``apex_core.sources.grep``) imports it without
the index or pydantic.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
"""O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer (it is then refused)."""


class OutsideTreeError(OSError):
    """A file reached through an indexed tree whose real location is elsewhere (through a link)."""


def is_inside(real: str, root: str) -> bool:
    """Whether the real path ``real`` is ``root`` or lies under it (both already resolved)."""
    return real == root or real.startswith(root.rstrip("/") + "/")


def real_root(root: str | Path) -> str:
    """A tree's root as :func:`read_text_inside` compares against it: every link resolved."""
    return os.path.realpath(root)


def read_text_inside(path: str | Path, root: str, max_bytes: int | None = None) -> str | None:
    """The text of ``path`` (UTF-8, undecodable bytes replaced, newlines made ``\\n`` as text
    mode would), if its real location is inside ``root`` (a :func:`real_root`); None when the file
    is larger than ``max_bytes``. Raises :class:`OutsideTreeError` for a file elsewhere and
    ``OSError`` for one that is missing, unreadable or not a regular file."""
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if not is_inside(_real_location(descriptor, path), root):
            raise OutsideTreeError(errno.EACCES, "it is a link to a place outside the indexed tree", str(path))
        if max_bytes is not None and info.st_size > max_bytes:
            return None
        chunks = []
        while chunk := os.read(descriptor, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _real_location(descriptor: int, path: str | Path) -> str:
    """Where the open file really is: the kernel's answer for the descriptor; without /proc, the
    path resolved (which a swap between opening and resolving could fool, hence second best)."""
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return os.path.realpath(path)
