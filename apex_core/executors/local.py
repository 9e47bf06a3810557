"""The local executor: this machine's GPUs, one grading per GPU at a time by default, as ``apex
grade`` does, or several at once (``gradings_per_device``).

``gradings_per_device`` threads per visible GPU (per CPU where there is none) take the next queued
request and grade it on their device through ``grade_content``: the judge, the warm pool, and this
machine's signed cache, which ``submit`` consults before queueing. Several gradings of one device
overlap only where the grading allows it (``Grading.on_device``: on the CPU their workers start,
compile and check correctness side by side; a GPU grading holds its device throughout), and each
measurement has the device to itself (``grader.slots``). It is the Ray
executor's reference (the same requests must get the same verdicts) and the API for an RL loop on
one host.
"""

from __future__ import annotations

import socket
import threading
from queue import Queue

from apex_core.errors import ApexUserError
from apex_core.executors.actor import grade_content
from apex_core.executors.base import DEFAULT_MAX_IN_FLIGHT, Executor
from apex_core.executors.requests import GradedSolution, GradingRequest, Placement
from apex_core.grader import GradeCache, cache_key, environment_key_for, gpu_count, grading_device
from apex_core.tasks.schema import Task


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, cache: GradeCache | None = None, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 devices: list[str] | None = None, gradings_per_device: int = 1) -> None:
        if gradings_per_device < 1:
            raise ApexUserError(f"gradings_per_device {gradings_per_device} must be at least 1")
        super().__init__(cache, max_in_flight)
        count = gpu_count()
        self.devices = devices or ([f"cuda:{i}" for i in range(count)] if count else ["cpu"])
        self.gradings_per_device = gradings_per_device
        self.host = socket.gethostname()
        self._queue: Queue[tuple[GradingRequest, Task] | None] = Queue()
        self._threads = [threading.Thread(target=self._serve, args=(device,), name=f"apex-executor-{device}-{number}",
                                          daemon=True)
                         for device in self.devices for number in range(gradings_per_device)]
        for thread in self._threads:
            thread.start()

    def _check(self, request: GradingRequest, task: Task) -> None:
        if request.options.device is not None:
            grading_device(task, request.options.device)
        if request.target is not None and task.needs_gpu:
            raise ApexUserError(f"target {request.target!r} places gradings on a Ray cluster's nodes; the local executor "
                                "grades on this machine: leave the target out or use the ray executor")

    def _cached(self, request: GradingRequest, task: Task) -> GradedSolution | None:
        key = cache_key(task.content_hash(), request.solution.sha256, environment_key_for(task, request.options), request.options)
        hit = self.cache.get(key)
        if hit is None:
            return None
        result = hit.model_copy(update={"cached": True, "solution_path": request.label or request.solution.name})
        return GradedSolution(grading_id=request.grading_id, task_id=task.id, result=result,
                              placement=Placement(executor="local", node="cache", host=self.host, actor="cache", attempts=0))

    def _enqueue(self, request: GradingRequest, task: Task) -> None:
        self._queue.put((request, task))

    def _serve(self, device: str) -> None:
        while (job := self._queue.get()) is not None:
            request, task = job
            options = request.options
            if task.needs_gpu and options.device is None and device != "cpu":
                options = options.model_copy(update={"device": device})
            try:
                result = grade_content(request.model_copy(update={"options": options}), self.cache)
            except BaseException as error:  # a user's mistake, or a bug of ours: the caller sees it, the thread serves on
                self._fail(request, error)
                continue
            placement = Placement(executor="local", node="local", host=self.host, actor=device if task.needs_gpu else "cpu",
                                  attempts=1)
            self._finish(request, task, GradedSolution(grading_id=request.grading_id, task_id=task.id, result=result,
                                                       placement=placement))

    def _shutdown(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
