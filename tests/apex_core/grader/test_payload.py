import json
import os
import pickle
import struct

import numpy as np
import pytest
import torch

from apex_core.grader.isolation.payload import ALIGN, decode_values, encode_values


def round_trip(values, library):
    return decode_values(encode_values(values).tobytes(), library)


def test_numpy_payloads_round_trip_with_plain_values():
    values = [np.arange(6, dtype=np.float32).reshape(2, 3), 1e-5, "x"]
    back = round_trip(values, "numpy")
    assert np.array_equal(back[0], values[0]) and back[1:] == [1e-5, "x"]


def test_numpy_payloads_keep_shape_and_dtype_of_odd_arrays():
    values = [np.array(True), np.zeros((2, 0)), np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]]
    for original, back in zip(values, round_trip(values, "numpy")):
        assert back.dtype == original.dtype and back.shape == original.shape and np.array_equal(back, original)


def test_torch_payloads_round_trip_and_land_on_the_cpu():
    values = [torch.ones(2, 2, dtype=torch.bfloat16), 3.0]
    back = round_trip(values, "torch")
    assert torch.equal(back[0], values[0]) and back[0].device.type == "cpu" and back[1] == 3.0


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor(2.5),
        torch.tensor([True, False, True]),
        torch.empty(0, 4),
        torch.arange(16.0).reshape(4, 4)[:, ::2],
        torch.linspace(-2, 2, 8).to(torch.float8_e4m3fn),
        torch.arange(-5, 5, dtype=torch.int64),
    ],
    ids=["0-d", "bool", "empty", "strided", "fp8", "int64"],
)
def test_torch_payloads_keep_bits_shape_and_dtype(tensor):
    (back,) = round_trip([tensor], "torch")
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back.reshape(-1).view(torch.uint8), tensor.contiguous().reshape(-1).view(torch.uint8))


def test_arrays_sit_at_aligned_offsets():
    payload = encode_values([np.ones(3, dtype=np.int8), np.ones(5, dtype=np.float64)])
    assert all(offset % ALIGN == 0 for offset, _ in payload.arrays)


def test_a_pickle_from_a_worker_is_rejected_not_unpickled():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(ValueError):
        decode_values(pickle.dumps([Evil()]), "torch")


def forged(items, data=b""):
    described = json.dumps(items).encode()
    head = struct.pack(">Q", len(described)) + described
    return head + bytes(-len(head) % ALIGN) + data


@pytest.mark.parametrize(
    ("items", "data"),
    [
        ([{"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16}], b"\0" * 8),
        ([{"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 8}], b"\0" * 16),
        ([{"dtype": "float32", "shape": [-4], "offset": 0, "nbytes": 16}], b"\0" * 16),
        ([{"dtype": "storage", "shape": [4], "offset": 0, "nbytes": 4}], b"\0" * 4),
        ([{"dtype": "float32", "shape": [4], "offset": -64, "nbytes": 16}], b"\0" * 16),
        ({"not": "a list"}, b""),
    ],
    ids=["shorter-than-it-says", "size-mismatch", "negative-shape", "unknown-dtype", "negative-offset", "not-a-list"],
)
def test_malformed_torch_payloads_are_rejected(items, data):
    with pytest.raises(ValueError):
        decode_values(forged(items, data), "torch")


def test_numpy_payloads_refuse_object_arrays():
    with pytest.raises(ValueError):
        decode_values(forged([{"dtype": "|O", "shape": [1], "offset": 0, "nbytes": 8}], b"\0" * 8), "numpy")


def test_a_torch_still_being_imported_by_another_thread_is_not_asked_for_tensors(monkeypatch):
    """While one thread imports torch, sys.modules holds the half-made module; a grading in another
    thread asking it for Tensor failed with "partially initialized module 'torch'" (2026-12-06)."""
    import importlib.machinery
    import sys
    import types

    from apex_core.grader.isolation.payload import imported_torch, is_array

    half_made = types.ModuleType("torch")
    half_made.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    half_made.__spec__._initializing = True
    monkeypatch.setitem(sys.modules, "torch", half_made)
    assert imported_torch() is None and is_array([1, 2]) is False
    half_made.__spec__._initializing = False
    half_made.Tensor = list
    assert imported_torch() is half_made and is_array([1, 2]) is True
