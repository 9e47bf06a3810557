"""The judge's private channel to a worker: framed messages over a pipe pair, and safe payloads.

A message is a JSON header plus an optional binary payload (``payload.py``), each length-prefixed;
a large payload from a worker travels through a shared file the judge created instead of the pipe.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import select
import struct
import time
from typing import Any

from apex_core.grader.isolation.payload import MAX_HEADER_BYTES, Payload

_LENGTH = struct.Struct(">Q")
MAX_PAYLOAD_BYTES = 1 << 34
SHARED_MIN_BYTES = 1 << 16
SHARED_KEY = "shared_bytes"


class ChannelClosed(Exception):
    """The other end closed the pipe (the worker exited or crashed)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


WAKE_S = 0.5
"""The longest a read blocks at once. The kernel may deliver Ctrl-C's SIGINT to any thread of the
judge (a heartbeat or a pool thread); Python then runs its handler only when the main thread runs
again, and a main thread blocked on a silent worker's pipe would never notice (seen: `apex grade`
sat 60 s after Ctrl-C). Waking twice a second lets the interrupt through."""


def _wait_readable(fd: int, deadline: float | None) -> None:
    while True:
        wait = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
        if wait <= 0:
            raise ChannelTimeout()
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            return


def _read_exact(fd: int, size: int, deadline: float | None) -> memoryview:
    buffer = memoryview(bytearray(size))
    got = 0
    while got < size:
        _wait_readable(fd, deadline)
        count = os.readv(fd, [buffer[got:]])
        if not count:
            raise ChannelClosed()
        got += count
    return buffer


def send(fd: int, header: dict[str, Any], payload: Payload | bytes = b"", shared: SharedFile | None = None) -> None:
    """Send ``header`` and ``payload``; with ``shared``, a payload of SHARED_MIN_BYTES or more is
    written into that file instead of the pipe."""
    if isinstance(payload, Payload) and shared is not None and payload.nbytes >= SHARED_MIN_BYTES:
        shared.write(payload)
        header, payload = {**header, SHARED_KEY: payload.nbytes}, b""
    data = payload.tobytes() if isinstance(payload, Payload) else payload
    encoded = json.dumps(header).encode()
    _write_all(fd, _LENGTH.pack(len(encoded)) + encoded + _LENGTH.pack(len(data)))
    if data:
        _write_all(fd, data)


def receive(
    fd: int, timeout: float | None = None, shared: SharedFile | None = None, max_payload: int = MAX_PAYLOAD_BYTES
) -> tuple[dict[str, Any], memoryview | bytes]:
    """The next message. A payload that came through ``shared`` is a view of that file: valid until
    the other side's next message. A payload above ``max_payload`` (what the reader expects at
    most) is a broken channel: a worker cannot make the judge map or buffer more than that."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (header_len,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    if header_len > MAX_HEADER_BYTES:
        raise ChannelClosed()
    header = json.loads(bytes(_read_exact(fd, header_len, deadline)))
    if not isinstance(header, dict):
        raise ChannelClosed()
    (payload_len,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    if payload_len > max_payload:
        raise ChannelClosed()
    payload: memoryview | bytes = _read_exact(fd, payload_len, deadline) if payload_len else b""
    if SHARED_KEY in header:
        size = header.pop(SHARED_KEY)
        if shared is None or payload_len or type(size) is not int or not 0 < size <= max_payload:
            raise ChannelClosed()
        payload = shared.read(size)
    return header, payload


class SharedFile:
    """A memory-backed file that the judge creates for one worker and both of them map.

    The worker copies a large reply's arrays straight into it (device to host once) and the judge
    reads them in place, instead of a pipe moving them at about 0.5 GB/s and both sides touching
    fresh memory for every reply. The judge seals the file against shrinking before the worker
    exists, so that no worker can truncate it under the judge's mapping (which would kill the judge
    with SIGBUS), and seals the seals, so that none can be added later.

    The judge also sizes the file to the largest payload it accepts before any worker exists. The
    file stays sparse (memory is used only where a reply writes), and a worker never has to grow
    it: a worker's file-size limit (``RLIMIT_FSIZE``, there to keep candidates from filling disks)
    applies to growing a memory file too, and a legitimate reply above that limit (the outputs of
    a large GEMM: 1.1 GiB for Gemma-2-27B's gate_up projection at 8,192 tokens) killed the worker
    on 2026-12-06.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._mapping: mmap.mmap | None = None

    @classmethod
    def create(cls) -> SharedFile | None:
        """A sealed file, or None where the system has no sealable memory files (the pipe then
        carries everything)."""
        if not hasattr(os, "memfd_create") or not hasattr(fcntl, "F_ADD_SEALS"):
            return None
        try:
            fd = os.memfd_create("apex-payload", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, MAX_PAYLOAD_BYTES)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        except OSError:
            return None
        return cls(fd)

    def _view(self, size: int) -> memoryview:
        if self._mapping is None or len(self._mapping) < size:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._mapping = mmap.mmap(self.fd, size, flags=flags)
        return memoryview(self._mapping)[:size]

    def write(self, payload: Payload) -> None:
        """Sender's side: write ``payload`` at the file's start (growing it only past the judge's
        size, which a reader then refuses anyway)."""
        if os.fstat(self.fd).st_size < payload.nbytes:
            os.ftruncate(self.fd, payload.nbytes)
        payload.write_into(self._view(payload.nbytes))

    def read(self, size: int) -> memoryview:
        """Receiver's side: the first ``size`` bytes, in place."""
        try:
            if os.fstat(self.fd).st_size < size:
                raise ChannelClosed()
            return self._view(size)
        except (OSError, ValueError):
            raise ChannelClosed() from None

    def close(self) -> None:
        """Close the descriptor; the mapping goes when the last array made from it does."""
        try:
            os.close(self.fd)
        except OSError:
            pass
