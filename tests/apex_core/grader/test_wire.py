import fcntl
import os
import resource

import numpy as np
import pytest
import torch

from apex_core.grader.isolation import wire
from apex_core.grader.isolation.payload import decode_values, encode_values

needs_sealed_files = pytest.mark.skipif(wire.SharedFile.create() is None, reason="no sealable memory files here")


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    os.close(read_fd)
    os.close(write_fd)


def test_messages_travel_over_a_pipe(pipe):
    read_fd, write_fd = pipe
    wire.send(write_fd, {"op": "call"}, b"payload")
    header, payload = wire.receive(read_fd, timeout=5)
    assert header == {"op": "call"} and bytes(payload) == b"payload"


def test_an_encoded_payload_travels_over_the_pipe_when_there_is_no_shared_file(pipe):
    read_fd, write_fd = pipe
    values = [torch.randn(100, 100)]  # 40 KB: within the pipe's buffer, as the test has no reader thread
    wire.send(write_fd, {"op": "call"}, encode_values(values))
    _, payload = wire.receive(read_fd, timeout=5)
    assert torch.equal(decode_values(payload, "torch")[0], values[0])


@needs_sealed_files
def test_large_payloads_go_through_the_shared_file_one_after_another(pipe):
    read_fd, write_fd = pipe
    judge_side = wire.SharedFile.create()
    worker_side = wire.SharedFile(os.dup(judge_side.fd))
    for rows in (1000, 3000):
        values = [np.random.default_rng(rows).standard_normal((rows, 100))]
        wire.send(write_fd, {"op": "call"}, encode_values(values), shared=worker_side)
        header, payload = wire.receive(read_fd, timeout=5, shared=judge_side)
        assert header == {"op": "call"}
        assert np.array_equal(decode_values(payload, "numpy")[0], values[0])
    worker_side.close()
    judge_side.close()


@needs_sealed_files
def test_a_worker_under_a_file_size_limit_smaller_than_its_reply_still_sends_it(pipe):
    read_fd, write_fd = pipe
    judge_side = wire.SharedFile.create()
    values = [np.arange(1 << 18, dtype=np.float32)]  # 1 MiB, four times the worker's limit
    child = os.fork()
    if child == 0:  # the worker: limited as a grader worker is, and the judge not
        try:
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 18, 1 << 18))
            wire.send(write_fd, {"op": "reply"}, encode_values(values), shared=wire.SharedFile(judge_side.fd))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    header, payload = wire.receive(read_fd, timeout=5, shared=judge_side)
    assert header == {"op": "reply"} and np.array_equal(decode_values(payload, "numpy")[0], values[0])
    judge_side.close()


@needs_sealed_files
def test_a_worker_cannot_shrink_or_unseal_the_shared_file():
    shared = wire.SharedFile.create()
    with pytest.raises(PermissionError):
        os.ftruncate(shared.fd, 0)
    with pytest.raises(PermissionError):
        fcntl.fcntl(shared.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
    shared.close()


@needs_sealed_files
def test_a_shared_file_shorter_than_announced_is_a_broken_channel_not_a_crash_of_the_judge(pipe):
    read_fd, write_fd = pipe
    shared = wire.SharedFile(os.memfd_create("apex-test-short"))  # not sized by the judge
    wire.send(write_fd, {"op": "call", wire.SHARED_KEY: 1 << 20})
    with pytest.raises(wire.ChannelClosed):
        wire.receive(read_fd, timeout=5, shared=shared)
    shared.close()


def test_a_shared_payload_announced_where_none_was_offered_is_a_broken_channel(pipe):
    read_fd, write_fd = pipe
    wire.send(write_fd, {"op": "call", wire.SHARED_KEY: 16})
    with pytest.raises(wire.ChannelClosed):
        wire.receive(read_fd, timeout=5)


def test_a_silent_pipe_times_out(pipe):
    read_fd, write_fd = pipe
    with pytest.raises(wire.ChannelTimeout):
        wire.receive(read_fd, timeout=0.2)


@needs_sealed_files
def test_a_reply_larger_than_the_reader_expects_is_a_broken_channel(pipe):
    read_fd, write_fd = pipe
    judge_side = wire.SharedFile.create()
    worker_side = wire.SharedFile(os.dup(judge_side.fd))
    wire.send(write_fd, {"op": "call"}, encode_values([np.zeros(1 << 20)]), shared=worker_side)
    with pytest.raises(wire.ChannelClosed):
        wire.receive(read_fd, timeout=5, shared=judge_side, max_payload=1 << 20)
    worker_side.close()
    judge_side.close()


def test_ctrl_c_delivered_to_another_thread_still_interrupts_a_read_from_a_silent_worker():
    """The kernel may hand SIGINT to any thread; the judge's main thread, blocked on a worker that
    says nothing, must still raise KeyboardInterrupt (within WAKE_S), not wait for the worker."""
    import subprocess
    import sys

    from tests.conftest import interruptible

    script = (
        "import os, signal, threading, time\n"
        "from apex_core.grader.isolation import wire\n"
        "read_end, _write_end = os.pipe()\n"
        "def other_thread():\n"
        "    time.sleep(0.3)\n"
        "    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # delivered here, not to the main thread\n"
        "threading.Thread(target=other_thread, daemon=True).start()\n"
        "try:\n"
        "    wire.receive(read_end)\n"
        "except KeyboardInterrupt:\n"
        "    raise SystemExit(130)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": root},
                          capture_output=True, text=True, timeout=30, preexec_fn=interruptible)
    assert done.returncode == 130, done.stderr[-800:]
