"""The warm pool keeps up with gradings: missing workers start together, never twice over."""

import threading
import time

from apex_core.grader.isolation.pool import WorkerPool
from apex_core.grader.isolation.process import WorkerSpec

SPEC = WorkerSpec(library="numpy", device="cpu")


class SlowStartingWorker:
    """Stands in for a worker process whose start (import, device context) takes a while."""

    running = 0
    most_at_once = 0
    lock = threading.Lock()

    def __init__(self, spec: WorkerSpec) -> None:
        with SlowStartingWorker.lock:
            SlowStartingWorker.running += 1
            SlowStartingWorker.most_at_once = max(SlowStartingWorker.most_at_once, SlowStartingWorker.running)
        time.sleep(0.3)
        with SlowStartingWorker.lock:
            SlowStartingWorker.running -= 1
        self.closed = False
        self.timeout_s = 0.0

    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


def _wait_until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_missing_workers_start_at_the_same_time_not_one_after_another():
    SlowStartingWorker.most_at_once = 0
    pool = WorkerPool(ready_per_spec=3, start_worker=SlowStartingWorker)
    started = time.monotonic()
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 3)
    assert SlowStartingWorker.most_at_once == 3
    assert time.monotonic() - started < 0.8  # three starts of 0.3 s in sequence would take 0.9 s
    pool.shutdown()


def test_preparing_again_while_workers_start_does_not_start_extra_ones():
    pool = WorkerPool(ready_per_spec=2, start_worker=SlowStartingWorker)
    pool.prepare(SPEC)
    pool.prepare(SPEC)
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 2)
    time.sleep(0.4)
    assert pool.ready_count(SPEC) == 2
    pool.shutdown()


def test_a_pooled_worker_is_handed_out_and_replaced():
    pool = WorkerPool(ready_per_spec=1, start_worker=SlowStartingWorker)
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 1)
    worker = pool.take(SPEC, timeout_s=7.0)
    assert isinstance(worker, SlowStartingWorker) and worker.timeout_s == 7.0
    assert pool.ready_count(SPEC) == 0
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 1)
    pool.shutdown()


def test_workers_that_finish_starting_after_shutdown_are_closed():
    pool = WorkerPool(ready_per_spec=1, start_worker=SlowStartingWorker)
    pool.prepare(SPEC)
    pool.shutdown()
    time.sleep(0.5)
    assert pool.ready_count(SPEC) == 0


def test_real_worker_processes_fill_the_pool_and_are_killed_at_shutdown():
    pool = WorkerPool(ready_per_spec=2)
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 2, seconds=60)
    worker = pool.take(SPEC, timeout_s=30.0)
    try:
        assert worker.alive()
    finally:
        worker.close()
    assert _wait_until(lambda: not worker.alive(), seconds=10)  # the reaper exits once it has collected the worker
    pool.shutdown()
    assert pool.ready_count(SPEC) == 0


def test_a_pool_found_empty_keeps_one_more_worker_ready_from_then_on(monkeypatch):
    monkeypatch.setattr("apex_core.grader.isolation.pool.MAX_READY", 8)  # as on a GPU host, whatever this machine has
    pool = WorkerPool(ready_per_spec=2, start_worker=SlowStartingWorker)
    pool.take(SPEC, timeout_s=5)  # nothing ready yet: started on the spot, and the pool grows
    pool.prepare(SPEC)
    assert _wait_until(lambda: pool.ready_count(SPEC) == 3)
    time.sleep(0.4)
    assert pool.ready_count(SPEC) == 3
    pool.shutdown()


def test_closing_a_worker_twice_leaves_the_channel_of_a_worker_started_in_between_alone():
    from apex_core.grader.isolation import protocol
    from apex_core.grader.isolation.process import WorkerProcess

    first = WorkerProcess(SPEC, timeout_s=60)
    first.close()
    second = WorkerProcess(SPEC, timeout_s=60)  # may reuse the descriptor numbers the first had
    try:
        first.close()
        reply, _ = second.request(protocol.Keep(name="still-mine"))
        assert reply.get("ok")
    finally:
        second.close()


def test_a_baseline_worker_checked_out_by_one_grading_is_out_of_reach_of_another():
    from apex_core.grader.state import BaselineWorkers

    class Idle:
        def __init__(self) -> None:
            self.closed = False

        def alive(self) -> bool:
            return not self.closed

        def close(self) -> None:
            self.closed = True

    workers, key, worker = BaselineWorkers(), ("task", "hash", SPEC), Idle()
    workers.give_back(key, worker)
    assert workers.check_out(key) is worker
    assert workers.check_out(key) is None
    workers.give_back(key, worker)
    assert workers.check_out(key) is worker
