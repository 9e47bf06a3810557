"""One patcher per environment at a time, and who owns what it patched.

The lock is an exclusive ``flock`` on a file named by the environment. The kernel drops it when
its holder exits, however it exits (kill -9 included), so a free lock with an open journal means
the owner died mid-way. The holder's pid and start time are written into the lock file, so a
refused second run can say who holds it.

A lock only says who patches *now*. A run that applied patches and went on to use them (the final
benchmark, the pipeline) holds no lock while it measures, yet its patches must go when it dies:
``ProcessIdentity`` names that run by pid *and* start time (and boot), so a pid the kernel has
since given to another process is not mistaken for the owner, and the next apex command restores
patches whose owner is gone.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (field 22 of /proc/PID/stat); None when
    no such process runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # the name in parentheses may hold spaces
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


class ProcessIdentity(BaseModel):
    """A process as the kernel knows it: a pid is reused, a pid with its start time and boot is not."""

    pid: int
    started: int
    """Clock ticks after boot when it started (0 where /proc is missing: then the pid alone counts)."""
    boot_id: str = ""

    @classmethod
    def current(cls) -> ProcessIdentity:
        return cls(pid=os.getpid(), started=_start_ticks(os.getpid()) or 0, boot_id=_boot_id())

    def alive(self) -> bool:
        if self.boot_id and self.boot_id != _boot_id():
            return False  # a reboot ended every process of the earlier boot
        if Path("/proc/self/stat").exists():
            return _start_ticks(self.pid) == self.started
        try:  # no /proc: the pid alone
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class EnvironmentLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: int | None = None
        self._since = ""

    def try_acquire(self, about: dict[str, str] | None = None) -> bool:
        """Take the lock if it is free; ``about`` goes into the file beside the pid, for a refusal to quote."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted at the lock's name must not make us truncate another file.
        handle = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return False
        self._handle = handle
        self._since = dt.datetime.now(dt.timezone.utc).isoformat()
        self.annotate(about or {})
        return True

    def annotate(self, about: dict[str, str]) -> None:
        """Rewrite what the held lock's file says about its holder (pid and since kept)."""
        if self._handle is None:
            return
        os.ftruncate(self._handle, 0)
        os.pwrite(self._handle, json.dumps({**about, "pid": os.getpid(), "since": self._since}).encode(), 0)

    def acquire(self, what: str) -> None:
        """Take the lock or refuse in one line naming the holder."""
        try:
            acquired = self.try_acquire()
        except OSError as error:
            raise ApexUserError(f"cannot keep this environment's patch lock in {self.path.parent} ({error.strerror}): its "
                                "prefix is not yours to write; patch a virtual environment you own (python -m venv)") from None
        if not acquired:
            holder = self.holder()
            who = f"process {holder.get('pid')} (since {holder.get('since')})" if holder else "another process"
            raise ApexUserError(f"{who} is patching this Python environment; wait for it to finish before you {what} "
                                "(a second patcher would interleave its changes with the first)")

    def holder(self) -> dict[str, object]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            os.close(self._handle)
            self._handle = None

    @property
    def held(self) -> bool:
        return self._handle is not None
