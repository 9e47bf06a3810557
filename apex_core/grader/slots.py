"""Device slots: while a grading times on a device, no other grading uses that device; the others queue.

Two gradings that time on the same GPU, or on the same CPU at once, measure each other: under 12
concurrent gradings of the CPU task a NumPy solution came out 264x in one measurement and 1472x in
the next (issue 13), and honest solutions were judged on that noise. So a grading holds its
device's slot while its workers run: exclusively when it times, shared when it only checks
correctness (gradings that do not time may run side by side, but never beside one that times).
A slot is an ``flock`` on a file in a machine-wide folder, which covers gradings in this process
(the MCP server, an RL loop) and in any other process on the machine (a second server, the CLI)
alike, and which the kernel releases when its holder dies, however it dies.

One slot per device: each GPU, named by its UUID where the runtime gives one (two processes that
see the same GPU under different indices, through ``CUDA_VISIBLE_DEVICES``, still share it), and
the CPU as a whole (the CPU tasks are memory-bound, and two kernels timed on different cores
still share the memory bus).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from apex_core.grader.state import STATE

POLL_S = 0.02
"""How often a queued grading tries its slot again."""
REPORT_EVERY_S = 1.0
"""How often a queued grading says that it is still waiting."""


def slots_folder() -> Path:
    """One folder for every user of the machine, so that a root server and a user's CLI queue on
    the same files (sticky and world-writable, like /tmp itself)."""
    folder = Path(os.environ.get("APEX_SLOTS_DIR") or Path(tempfile.gettempdir()) / "apex-device-slots")
    try:
        # parents too: a confined agent session sees a private /tmp, where a folder named from
        # outside (APEX_SLOTS_DIR) does not exist yet
        folder.mkdir(mode=0o1777, parents=True, exist_ok=True)
        if folder.stat().st_uid == os.geteuid():
            os.chmod(folder, 0o1777)
    except OSError:
        pass
    return folder


def slot_name(device: str) -> str:
    if device == "cpu":
        return "cpu"
    return f"gpu-{_gpu_identity(device)}"


def _gpu_identity(device: str) -> str:
    import torch

    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except (AttributeError, RuntimeError, AssertionError):
        uuid = ""
    return uuid or f"index{index}"


def _open(name: str) -> int:
    path = slots_folder() / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # another user's grading must be able to open it too
    return fd


def _try_lock(fd: int, exclusive: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


@contextlib.contextmanager
def device_slot(device: str, exclusive: bool, report: Callable[[str], None] | None = None) -> Iterator[str]:
    """Hold ``device``'s slot (``exclusive`` to time) for the block; yields the slot's name.

    Until it is free, ``report`` is called about once a second with a line that says the grading
    is queued and how many other gradings of this process wait with it.
    """
    name = slot_name(device)
    fd = _open(name)
    queue = STATE.slot_queue
    try:
        with queue.waiting(name):
            next_report = 0.0
            while not _try_lock(fd, exclusive):
                now = time.monotonic()
                if report is not None and now >= next_report:
                    others = queue.others(name)
                    also = f"; {others} other grading(s) of this process wait too" if others else ""
                    report(f"queued: another grading is using {device}; this one starts when it is free{also}")
                    next_report = now + REPORT_EVERY_S
                time.sleep(POLL_S)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield name
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
