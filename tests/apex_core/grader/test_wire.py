import io
import os
import pickle

import numpy as np
import pytest
import torch

from apex_core.grader import wire


def test_numpy_payloads_round_trip_with_plain_values():
    values = [np.arange(6, dtype=np.float32).reshape(2, 3), 1e-5, "x"]
    back = wire.decode_values(wire.encode_values(values, "numpy"), "numpy")
    assert np.array_equal(back[0], values[0]) and back[1:] == [1e-5, "x"]


def test_torch_payloads_round_trip_and_land_on_the_cpu():
    values = [torch.ones(2, 2, dtype=torch.bfloat16), 3.0]
    back = wire.decode_values(wire.encode_values(values, "torch"), "torch")
    assert torch.equal(back[0], values[0]) and back[1] == 3.0


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickled_object_from_a_worker_is_not_executed():
    buffer = io.BytesIO()
    torch.save([_Evil()], buffer)
    with pytest.raises(pickle.UnpicklingError):
        wire.decode_values(buffer.getvalue(), "torch")


def test_messages_travel_over_a_pipe():
    read_fd, write_fd = os.pipe()
    wire.send(write_fd, {"op": "call"}, b"payload")
    header, payload = wire.receive(read_fd, timeout=5)
    assert header == {"op": "call"} and payload == b"payload"
    os.close(read_fd)
    os.close(write_fd)


def test_a_silent_pipe_times_out():
    read_fd, write_fd = os.pipe()
    with pytest.raises(wire.ChannelTimeout):
        wire.receive(read_fd, timeout=0.2)
    os.close(read_fd)
    os.close(write_fd)
