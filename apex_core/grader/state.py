"""What the gradings of one process share, held in one object with an explicit lifetime.

Several things outlive a single grading on purpose: the warm pool of solution workers and the
baseline's idle workers (no process start, import or compile per grading), the cores gradings
time on (new workers start away from them), the baseline's profiler trace and medians per task
and device, the gradings queued for each device slot, the reader of the clocks, and the verdict
that an earlier solution changed installed libraries. They used to be module globals scattered
through the judge and the isolation modules; here they are one ``GraderState``, created with the
process and closed at its exit (``STATE``), and safe to use from the threads of concurrent
gradings. The isolation modules hold no such state: they are handed what they need (the pool's
``start_worker``, a worker's ``timing_cores``), so they never import this module.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apex_core.grader.isolation.pool import WorkerPool, pop_live
from apex_core.grader.isolation.process import WorkerProcess, WorkerSpec

BASELINE_WORKERS_KEPT = 4
"""The most recently used idle baseline workers stay; each holds a device context and staged inputs."""


class BaselineWorkers:
    """Idle baseline workers kept between gradings (pool mode), by task, task content and spec.

    A grading checks one out for its whole length (its calibration and its timing must see the
    same process) and gives it back at its end; while it is out, no other grading can reach it.
    Two gradings that once shared one baseline worker interleaved their requests on its pipe: one
    read the other's reply ("did not carry the judge's nonce: it was forged") and a worker closed
    by one died under the other (issue 13).
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, WorkerSpec], list[WorkerProcess]] = {}
        self._lock = threading.Lock()

    def check_out(self, key: tuple[str, str, WorkerSpec]) -> WorkerProcess | None:
        with self._lock:
            found, dead = pop_live(self._idle.get(key, []))
        for worker in dead:
            worker.close()
        return found

    def give_back(self, key: tuple[str, str, WorkerSpec], worker: WorkerProcess) -> None:
        surplus: list[WorkerProcess] = []
        with self._lock:
            idle = self._idle.pop(key, [])
            idle.append(worker)
            self._idle[key] = idle  # the most recently used key last
            while sum(len(v) for v in self._idle.values()) > BASELINE_WORKERS_KEPT:
                oldest = next(iter(self._idle))
                surplus.append(self._idle[oldest].pop(0))
                if not self._idle[oldest]:
                    del self._idle[oldest]
        for extra in surplus:
            extra.close()

    def close_all(self) -> None:
        with self._lock:
            workers = [w for idle in self._idle.values() for w in idle]
            self._idle.clear()
        for worker in workers:
            worker.close()


class SlotQueue:
    """How many gradings of this process wait for each device slot (``slots``), so that a queued
    grading's progress can say how many others wait with it."""

    def __init__(self) -> None:
        self._waiting: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def waiting(self, slot: str) -> Iterator[None]:
        """Count one more grading waiting for ``slot`` for the block."""
        with self._lock:
            self._waiting[slot] = self._waiting.get(slot, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting[slot] -= 1

    def others(self, slot: str) -> int:
        """Gradings waiting for ``slot`` besides the one asking (which counts itself in)."""
        with self._lock:
            return self._waiting.get(slot, 1) - 1


class GraderState:
    def __init__(self) -> None:
        # Cores handed out as timing cores so far (the judge records each one it uses): workers
        # start on the others.
        self.timing_cores: set[int] = set()
        # Warm solution (and baseline) workers, started ahead of the gradings that take them.
        self.worker_pool = WorkerPool(start_worker=self.start_worker)
        self.baseline_workers = BaselineWorkers()
        # The baseline's profiler trace per task, task content and device: which stream it times.
        self.baseline_traces: dict[tuple[str, str, str], dict[str, Any]] = {}
        # The baseline's last median per task, device and timed shape: which shapes calibration skips.
        self.baseline_medians: dict[tuple[str, str, str, tuple[tuple[str, int], ...]], float] = {}
        # Set once a solution changed an installed library; nothing graded here after that can be trusted.
        self.dirty_environment: list[str] = []
        # Reads a grading needs but need not wait for at once (the clocks before and after it).
        self.background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="apex-judge")
        # Gradings of this process queued for each device slot.
        self.slot_queue = SlotQueue()

    def start_worker(self, spec: WorkerSpec, timeout_s: float = 180.0) -> WorkerProcess:
        """A new worker for ``spec``, started away from the timing cores."""
        return WorkerProcess(spec, timeout_s, timing_cores=self.timing_cores)

    def close(self) -> None:
        # In the order the exit handlers ran when these were module globals: the pool's was
        # registered first, so it ran last.
        self.baseline_workers.close_all()
        self.background.shutdown(wait=False, cancel_futures=True)
        self.worker_pool.shutdown()


STATE = GraderState()
atexit.register(STATE.close)
