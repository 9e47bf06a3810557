"""One pipeline run per Python environment at a time.

A run measures the environment's stack as its baseline, then patches that stack and measures it
again. A second run in the same environment would take the first's patches for the original (its
"baseline" a patched model) and could restore them under the first's final benchmark. So a run
takes an exclusive lock on the environment for as long as it works, and a second is refused at
once, in one line that names the holder's run and process. The lock is an ``flock``: the kernel
drops it when the holder exits, however it exits.

Stages that only read a run (``score``, ``report``) take no lock: looking at an old run's report
while another run works is fine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.patcher.journal import environment_key, environment_root, state_dir
from apex_core.patcher.lock import EnvironmentLock

READ_ONLY_STAGES = frozenset({"score", "report"})
"""Stages that read the run and write its report, touching neither the stack nor a measurement."""


def run_lock_path() -> Path:
    return state_dir() / f"{environment_key()}.run.lock"


def needs_the_lock(only: tuple[str, ...] | None) -> bool:
    return only is None or not set(only) <= READ_ONLY_STAGES


@contextlib.contextmanager
def one_run_per_environment(run_id: str) -> Iterator[EnvironmentLock]:
    """Hold the environment's run lock for the block (``lock.annotate`` names a run whose id comes
    later); ApexUserError naming the holder if another run has it."""
    lock = EnvironmentLock(run_lock_path())
    try:
        acquired = lock.try_acquire({"run_id": run_id})
    except OSError as error:
        raise ApexUserError(f"cannot keep this environment's run lock in {lock.path.parent} ({error.strerror}): its "
                            "prefix is not yours to write; run Apex from a virtual environment you own (python -m venv)") from None
    if not acquired:
        holder = lock.holder()
        who = f"run {holder.get('run_id', '?')} (process {holder.get('pid', '?')}, since {holder.get('since', '?')})" \
            if holder else "another run"
        raise ApexUserError(f"{who} is using this Python environment ({environment_root()}); one run at a time: "
                            "wait for it, or stop it (Ctrl-C; it restores its patches), then start yours")
    try:
        yield lock
    finally:
        lock.release()



def run_holding_the_lock() -> str | None:
    """The id of the run that holds this environment's run lock now, None when it is free."""
    path = run_lock_path()
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = EnvironmentLock(path).holder()
        return str(holder.get("run_id")) if holder.get("run_id") else "(unnamed)"
    else:
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None
    finally:
        os.close(handle)
