"""A warm pool of worker processes: started, libraries imported, device context created, idle.

A grading takes a ready worker instead of paying for process start, ``import torch``/``triton``
and context creation; each worker still serves exactly one solution and is then killed, so no
state passes from one candidate to the next. Replacements are started in the background once a
grading has finished. Worth it in long-lived processes (the MCP server, RL graders); a one-shot
command grading one file does better without it. The judge's pool is ``GraderState.worker_pool``:
one per process, shut down at its exit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from apex_core.grader.isolation.process import WorkerProcess, WorkerSpec


def _usable_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2


MAX_READY = min(8, _usable_cores() // 2)
"""The most idle workers kept for one spec: each holds a device context and a few GiB of host memory,
and each start keeps a core busy for seconds (so a 2-core machine keeps ready_per_spec)."""
READY_PER_SPEC = max(1, min(3, _usable_cores() // 4))
"""Idle workers kept for one spec to begin with: three on a GPU host of 12 cores or more, one on a
small machine. A start keeps a core busy for 1.5 s (NumPy) to 4 s (PyTorch and Triton), and a
grading takes workers of two specs (the solution's and our baseline's): on two cores, three of each
meant six starts competing with the grading that set them off, and with whatever ran beside it."""


def pop_live(idle: list[WorkerProcess]) -> tuple[WorkerProcess | None, list[WorkerProcess]]:
    """Pop ``idle``'s most recently added live worker (None: none left), and the dead ones popped on
    the way, for the caller to close once it has let go of its lock (closing kills a process and
    removes its scratch folder: seconds that no other grading should wait for)."""
    dead: list[WorkerProcess] = []
    while idle:
        worker = idle.pop()
        if worker.alive():
            return worker, dead
        dead.append(worker)
    return None, dead


class WorkerPool:
    def __init__(
        self, ready_per_spec: int = READY_PER_SPEC, start_worker: Callable[[WorkerSpec], WorkerProcess] = WorkerProcess
    ) -> None:
        self.ready_per_spec = ready_per_spec
        self._start_worker = start_worker
        self._ready: dict[WorkerSpec, list[WorkerProcess]] = {}
        self._starting: dict[WorkerSpec, int] = {}
        # Ready workers wanted per spec: ready_per_spec, raised each time a take finds none.
        self._target: dict[WorkerSpec, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def take(self, spec: WorkerSpec, timeout_s: float) -> WorkerProcess:
        """A started worker for ``spec``: a pooled one if ready, else a new one.

        Finding the pool empty means gradings outpace the starts: the pool then keeps one more
        worker ready for this spec (up to MAX_READY; docs/grader.md, 'Measured reasons').
        """
        with self._lock:
            worker, dead = pop_live(self._ready.setdefault(spec, []))
            if worker is None:
                wanted = self._target.get(spec, self.ready_per_spec) + 1
                self._target[spec] = max(self.ready_per_spec, min(MAX_READY, wanted))
        for gone in dead:
            gone.close()
        if worker is None:
            worker = self._start_worker(spec)
        worker.timeout_s = timeout_s
        return worker

    def ready_count(self, spec: WorkerSpec) -> int:
        with self._lock:
            return len(self._ready.get(spec, []))

    def prepare(self, spec: WorkerSpec) -> None:
        """Top the pool up for ``spec`` in the background. The judge calls it when a grading takes a
        worker; the new workers start on the cores no timing uses (``process.startup_cpus``, through
        the ``start_worker`` the pool was given).

        Every missing worker starts at once, each in its own thread: a GPU worker takes seconds to
        start (import, device context, profiler start-up), and started one after another they fell
        behind the gradings (docs/grader.md, 'Measured reasons').
        """
        with self._lock:
            if self._closed:
                return
            target = self._target.get(spec, self.ready_per_spec)
            missing = target - len(self._ready.get(spec, [])) - self._starting.get(spec, 0)
            self._starting[spec] = self._starting.get(spec, 0) + max(missing, 0)
        for _ in range(max(missing, 0)):
            threading.Thread(target=self._start_one, args=(spec,), name="apex-worker-pool", daemon=True).start()

    def _start_one(self, spec: WorkerSpec) -> None:
        worker = None
        try:
            worker = self._start_worker(spec)
        except Exception:  # a failed start only means the next grading starts its own worker
            pass
        with self._lock:
            self._starting[spec] -= 1
            if worker is not None and not self._closed:
                self._ready.setdefault(spec, []).append(worker)
                return
        if worker is not None:
            worker.close()

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for ready in self._ready.values() for w in ready]
            self._ready.clear()
        for worker in workers:
            worker.close()

