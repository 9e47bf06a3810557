"""The judge's private channel to a worker: framed messages over a pipe pair, and safe payloads.

A message is a JSON header plus an optional binary payload, each length-prefixed. Payloads that
come back from a worker are decoded without unpickling arbitrary objects (``np.load`` with
``allow_pickle=False``, ``torch.load`` with ``weights_only=True``), so a candidate cannot run code
in the judge by sending crafted bytes.
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from typing import Any

import numpy as np

_LENGTH = struct.Struct(">Q")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 1 << 34


class ChannelClosed(Exception):
    """The other end closed the pipe (the worker exited or crashed)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise ChannelTimeout()
        chunk = os.read(fd, min(size - len(chunks), 1 << 22))
        if not chunk:
            raise ChannelClosed()
        chunks.extend(chunk)
    return bytes(chunks)


def send(fd: int, header: dict[str, Any], payload: bytes = b"") -> None:
    encoded = json.dumps(header).encode()
    _write_all(fd, _LENGTH.pack(len(encoded)) + encoded + _LENGTH.pack(len(payload)))
    if payload:
        _write_all(fd, payload)


def receive(fd: int, timeout: float | None = None) -> tuple[dict[str, Any], bytes]:
    deadline = None if timeout is None else time.monotonic() + timeout
    (header_len,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    if header_len > MAX_HEADER_BYTES:
        raise ChannelClosed()
    header = json.loads(_read_exact(fd, header_len, deadline))
    if not isinstance(header, dict):
        raise ChannelClosed()
    (payload_len,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    if payload_len > MAX_PAYLOAD_BYTES:
        raise ChannelClosed()
    payload = _read_exact(fd, payload_len, deadline) if payload_len else b""
    return header, payload


# --- payloads ---------------------------------------------------------------------------------


def encode_values(values: list[Any], library: str) -> bytes:
    """Serialize a list of arrays/tensors and plain numbers (tensors are moved to the CPU)."""
    if library == "torch":
        import torch

        cpu = [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in values]
        buffer = io.BytesIO()
        torch.save(cpu, buffer)
        return buffer.getvalue()
    buffer = io.BytesIO()
    kinds = []
    arrays = []
    for value in values:
        if isinstance(value, np.ndarray):
            kinds.append({"array": len(arrays)})
            arrays.append(value)
        else:
            kinds.append({"value": value})
    header = json.dumps(kinds).encode()
    buffer.write(_LENGTH.pack(len(header)) + header)
    for array in arrays:
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def decode_values(data: bytes, library: str) -> list[Any]:
    """Inverse of ``encode_values``; safe on bytes from an untrusted worker."""
    if library == "torch":
        import torch

        loaded = torch.load(io.BytesIO(data), weights_only=True)
        if not isinstance(loaded, list):
            raise ValueError("payload is not a list")
        return loaded
    buffer = io.BytesIO(data)
    (header_len,) = _LENGTH.unpack(buffer.read(_LENGTH.size))
    kinds = json.loads(buffer.read(header_len))
    arrays_needed = sum(1 for kind in kinds if "array" in kind)
    arrays = [np.load(buffer, allow_pickle=False) for _ in range(arrays_needed)]
    return [arrays[kind["array"]] if "array" in kind else kind["value"] for kind in kinds]
