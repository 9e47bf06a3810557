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

A grading holds its slot stage by stage (``DeviceHold``): exclusively while it measures
(calibration, timing), shared while it starts workers, loads and compiles the solution and checks
its correctness, which may then run beside other gradings' work of that kind but never beside a
measurement. Which gradings check side by side is the grading's choice (``Grading.on_device``:
for now those on the CPU, where it measured faster; a GPU grading holds its slot exclusively from
its first stage to its last). A grading waiting to measure goes first: it takes the slot's
turnstile, which a grading about to take the slot shared must pass, so a stream of overlapping
shared holders cannot keep it waiting forever.
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


def _wait_for(try_lock: Callable[[], bool], name: str, device: str, report: Callable[[str], None] | None) -> None:
    """Poll ``try_lock`` until it succeeds; while it fails, ``report`` hears about once a second
    that the grading is queued and how many other gradings of this process wait with it."""
    queue = STATE.slot_queue
    with queue.waiting(name):
        next_report = 0.0
        while not try_lock():
            now = time.monotonic()
            if report is not None and now >= next_report:
                others = queue.others(name)
                also = f"; {others} other grading(s) of this process wait too" if others else ""
                report(f"queued: another grading is using {device}; this one starts when it is free{also}")
                next_report = now + REPORT_EVERY_S
            time.sleep(POLL_S)


class DeviceHold:
    """One grading's hold on its device's slot, taken for each stage that uses the device: shared
    to load and check, exclusive to measure (``take``), and let go in between (``let_go``).

    Shared, the slot is taken only through the turnstile, which a grading on its way to measure
    holds exclusively while it waits, so one waiting to measure is not starved by others that keep
    the slot shared in turn. Let go between stages, it holds nothing: a grading done measuring
    does not wait for the next measurement to finish before it can report.
    """

    def __init__(self, device: str, report: Callable[[str], None] | None = None) -> None:
        self.device = device
        self.report = report
        self.name = slot_name(device)
        self._slot = -1
        self._turnstile = -1

    def take(self, exclusive: bool) -> None:
        """Wait for the slot, exclusively to measure, shared otherwise."""
        if self._slot < 0:
            self._slot = _open(self.name)
            self._turnstile = _open(f"{self.name}.turnstile")
        if exclusive:
            _wait_for(lambda: _try_lock(self._turnstile, exclusive=True), self.name, self.device, self.report)
            try:
                _wait_for(lambda: _try_lock(self._slot, exclusive=True), self.name, self.device, self.report)
            finally:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            return

        def passed_and_shared() -> bool:
            if not _try_lock(self._turnstile, exclusive=False):
                return False
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            return _try_lock(self._slot, exclusive=False)

        _wait_for(passed_and_shared, self.name, self.device, self.report)

    def let_go(self) -> None:
        if self._slot >= 0:
            fcntl.flock(self._slot, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def held(self, exclusive: bool) -> Iterator[None]:
        self.take(exclusive)
        try:
            yield
        finally:
            self.let_go()

    def close(self) -> None:
        for fd in (self._slot, self._turnstile):
            if fd >= 0:
                os.close(fd)  # closing lets go of any lock still held
        self._slot = self._turnstile = -1

    def __enter__(self) -> DeviceHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
