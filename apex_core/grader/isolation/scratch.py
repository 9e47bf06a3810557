"""Scratch directories of workers, named after the judge that made them, so that the next judge can
remove those of a judge that died without cleaning up (kill -9, the OOM killer, a lost machine).

A worker's scratch holds its log, compile-cache copies and large replies; its judge removes it when
the worker is closed. A judge that is killed cannot, and on a GPU machine that grades all day the
leftovers add up (65 of them in one day on our CI machine). A directory is removed only when the
judge whose process id it names is gone; one whose judge still runs, or whose name does not follow
the scheme, is left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

PREFIX = "apex-worker-"
# Whether this process has swept yet: a latch of the process, whoever starts its first child (a
# judge, the patcher's confined children), not state of its gradings (``GraderState``).
_swept = False
_sweep_lock = threading.Lock()


def new_scratch() -> Path:
    """A fresh private directory for one worker of this judge (mode 0700)."""
    sweep_once()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def sweep_once(root: Path | None = None) -> None:
    """Remove the scratch directories of dead judges, once per process."""
    global _swept
    with _sweep_lock:
        if _swept:
            return
        _swept = True
    remove_orphans(root)


def remove_orphans(root: Path | None = None) -> list[Path]:
    """Remove the scratch directories under ``root`` (default: the temporary directory) whose
    judge is no longer running; the ones removed."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        owner = path.name[len(PREFIX):].split("-", 1)[0]
        if not owner.isdigit() or process_alive(int(owner)) or not path.is_dir() or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
