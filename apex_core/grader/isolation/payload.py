"""Arrays as bytes between a worker and the judge: raw bytes described by JSON, never a pickle.

A payload is an 8-byte length, a JSON list describing each value (an array's dtype, shape, offset
and size, or a plain JSON value), then the arrays' raw bytes at 64-byte aligned offsets. Decoding
reads only JSON and raw bytes of allow-listed dtypes, and checks every size and offset: nothing a
candidate sends can run code in the judge or make it read outside the payload.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

_LENGTH = struct.Struct(">Q")
MAX_HEADER_BYTES = 1 << 20
ALIGN = 64
_TORCH_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
)  # fmt: skip


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


@dataclass
class Payload:
    """An encoded payload, not yet written anywhere: the arrays stay where they are (a GPU tensor on
    its device) until ``write_into`` copies each one once into the destination."""

    head: bytes
    arrays: list[tuple[int, Any]]
    """(offset in the payload, flat uint8 view of the array's bytes) for each non-empty array."""
    nbytes: int

    def write_into(self, buffer: memoryview) -> None:
        """Copy the payload into the first ``nbytes`` of ``buffer`` (device arrays are copied to it
        directly)."""
        buffer[: len(self.head)] = self.head
        for offset, raw in self.arrays:
            target = buffer[offset : offset + raw.shape[0]]
            if isinstance(raw, np.ndarray):
                np.frombuffer(target, dtype=np.uint8)[...] = raw
            else:
                import torch

                torch.frombuffer(target, dtype=torch.uint8).copy_(raw)

    def tobytes(self) -> bytearray:
        data = bytearray(self.nbytes)
        self.write_into(memoryview(data))
        return data


def flat_bytes(value: Any) -> tuple[str, list[int], Any]:
    """(dtype name, shape, flat C-ordered uint8 view of the logical contents, on the array's own
    device) of a NumPy array or torch tensor: what a payload carries and what a digest sums."""
    if isinstance(value, np.ndarray):
        array = value if value.flags.c_contiguous else value.copy(order="C")  # ascontiguousarray makes 0-d 1-d
        return array.dtype.str, list(array.shape), array.reshape(-1).view(np.uint8)
    import torch

    tensor = value.detach()
    return str(tensor.dtype).removeprefix("torch."), list(tensor.shape), tensor.contiguous().reshape(-1).view(torch.uint8)


def imported_torch() -> Any:
    """PyTorch if this process has finished importing it, else None (it is not imported just to ask).

    While one thread imports it, ``sys.modules`` already holds the half-made module: a grading in
    another thread of the grader's server that asked it for ``Tensor`` then failed ("partially
    initialized module 'torch' has no attribute 'Tensor'", concurrent gradings of a NumPy task,
    2026-12-06). No tensor can exist before that import ends, so "not yet" is the right answer."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return None
    return torch


def is_array(value: Any) -> bool:
    """A NumPy array or a torch tensor."""
    if isinstance(value, np.ndarray):
        return True
    torch = imported_torch()
    return torch is not None and isinstance(value, torch.Tensor)


def encode_values(values: list[Any]) -> Payload:
    """Arrays (torch tensors on any device) and plain JSON values, in order."""
    items: list[dict[str, Any]] = []
    raws: list[tuple[int, Any]] = []
    offset = 0
    for value in values:
        if not is_array(value):
            items.append({"value": value})
            continue
        dtype, shape, raw = flat_bytes(value)
        size = int(raw.shape[0])
        items.append({"dtype": dtype, "shape": shape, "offset": offset, "nbytes": size})
        if size:
            raws.append((offset, raw))
        offset += _aligned(size)
    described = json.dumps(items).encode()
    start = _aligned(_LENGTH.size + len(described))
    head = _LENGTH.pack(len(described)) + described
    return Payload(head=head, arrays=[(start + o, raw) for o, raw in raws], nbytes=start + offset)


def _torch_dtype(name: str) -> Any:
    import torch

    dtype = getattr(torch, name, None) if name in _TORCH_DTYPE_NAMES else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"payload names an unsupported dtype {name!r}")
    return dtype


def _numpy_dtype(name: str) -> np.dtype:
    try:
        dtype = np.dtype(name)
    except TypeError:
        raise ValueError(f"payload names an unsupported dtype {name!r}") from None
    if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"payload names an unsupported dtype {name!r}")
    return dtype


def decode_values(data: Any, library: str) -> list[Any]:
    """Inverse of ``encode_values``, on the host; any inconsistency raises ValueError (the bytes
    are untrusted). Arrays are views of ``data``, not copies."""
    view = memoryview(data).cast("B")
    if view.readonly:  # arrays made from it must be writable like any other
        view = memoryview(bytearray(view))
    if view.nbytes < _LENGTH.size:
        raise ValueError("payload too short")
    (described_len,) = _LENGTH.unpack(view[: _LENGTH.size])
    if described_len > MAX_HEADER_BYTES or _LENGTH.size + described_len > view.nbytes:
        raise ValueError("payload header does not fit")
    items = json.loads(bytes(view[_LENGTH.size : _LENGTH.size + described_len]))
    if not isinstance(items, list):
        raise ValueError("payload header is not a list")
    start = _aligned(_LENGTH.size + described_len)
    values = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("payload item is not an object")
        values.append(_decode_array(view, start, item, library) if "dtype" in item else item.get("value"))
    return values


def _decode_array(view: memoryview, start: int, item: dict[str, Any], library: str) -> Any:
    shape, offset, nbytes = item.get("shape"), item.get("offset"), item.get("nbytes")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise ValueError("payload array has a malformed shape")
    if type(offset) is not int or type(nbytes) is not int or offset < 0 or start + offset + nbytes > view.nbytes:
        raise ValueError("payload array lies outside the payload")
    count = math.prod(shape)
    if library == "torch":
        import torch

        dtype = _torch_dtype(str(item.get("dtype")))
        if count * dtype.itemsize != nbytes:
            raise ValueError("payload array's size does not match its shape")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        raw = torch.frombuffer(view, dtype=torch.uint8, count=nbytes, offset=start + offset)
        return raw.view(dtype).reshape(tuple(shape))
    np_dtype = _numpy_dtype(str(item.get("dtype")))
    if count * np_dtype.itemsize != nbytes:
        raise ValueError("payload array's size does not match its shape")
    return np.frombuffer(view, dtype=np.uint8, count=nbytes, offset=start + offset).view(np_dtype).reshape(tuple(shape))
