"""A warm pool of worker processes: started, libraries imported, device context created, idle.

A grading takes a ready worker instead of paying for process start, ``import torch``/``triton``
and context creation; each worker still serves exactly one solution and is then killed, so no
state passes from one candidate to the next. Replacements are started in the background once a
grading has finished. Worth it in long-lived processes (the MCP server, RL graders); a one-shot
command grading one file does better without it.
"""

from __future__ import annotations

import atexit
import threading

from apex_core.grader.process import WorkerProcess, WorkerSpec


class WorkerPool:
    def __init__(self, ready_per_spec: int = 2) -> None:
        self.ready_per_spec = ready_per_spec
        self._ready: dict[WorkerSpec, list[WorkerProcess]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def take(self, spec: WorkerSpec, timeout_s: float) -> WorkerProcess:
        """A started worker for ``spec``: a pooled one if ready, else a new one."""
        worker = None
        with self._lock:
            ready = self._ready.setdefault(spec, [])
            while ready and worker is None:
                candidate = ready.pop()
                if candidate.alive():
                    worker = candidate
                else:
                    candidate.close()
        if worker is None:
            worker = WorkerProcess(spec, timeout_s)
        worker.timeout_s = timeout_s
        return worker

    def prepare(self, spec: WorkerSpec) -> None:
        """Top the pool up for ``spec`` in the background; called after a grading, never during one,
        so starting workers does not disturb a measurement."""
        self._refill_later(spec)

    def _refill_later(self, spec: WorkerSpec) -> None:
        def refill() -> None:
            while True:
                with self._lock:
                    if self._closed or len(self._ready.get(spec, [])) >= self.ready_per_spec:
                        return
                try:
                    worker = WorkerProcess(spec)
                except Exception:  # a failed start only means the next grading starts its own worker
                    return
                with self._lock:
                    if self._closed:
                        worker.close()
                        return
                    self._ready.setdefault(spec, []).append(worker)

        threading.Thread(target=refill, name="apex-worker-pool", daemon=True).start()

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for ready in self._ready.values() for w in ready]
            self._ready.clear()
        for worker in workers:
            worker.close()


POOL = WorkerPool()
atexit.register(POOL.shutdown)
