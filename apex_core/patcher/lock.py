"""One patcher per environment at a time: an exclusive ``flock`` on a file named by the environment.

The kernel drops the lock when its holder exits, however it exits (kill -9 included), so a free
lock with an open journal means the owner died mid-way. The holder's pid and start time are
written into the lock file, so a refused second run can say who holds it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path

from apex_core.errors import ApexUserError


class EnvironmentLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: int | None = None

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return False
        os.ftruncate(handle, 0)
        os.write(handle, json.dumps({"pid": os.getpid(), "since": dt.datetime.now(dt.timezone.utc).isoformat()}).encode())
        self._handle = handle
        return True

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
