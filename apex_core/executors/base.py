"""What every grading executor does the same way: accept requests, answer each grading id once.

An executor takes ``GradingRequest``s and gives back ``GradedSolution``s as futures, so a caller
(an RL loop, the pipeline, ``apex grade``) can wait for one, or iterate results as they finish
(``grade_many``). This base holds what must not differ between executors:

- **Checks at submit.** An unknown task, a solution name of the wrong kind, or a placement no
  node can satisfy raise an ``ApexUserError`` from ``submit`` itself, before anything is queued.
- **Back-pressure.** At most ``max_in_flight`` gradings are queued or running; ``submit`` blocks
  until one finishes (``grade_many`` pulls requests from its iterable only as fast as that).
- **Once per grading id.** A second submit of an id returns the first one's future; an answer
  that arrives for an id already answered (a retried grading whose first actor replied after
  all) is dropped and counted in ``stats.duplicates_dropped``. So no grading is counted twice.
- **Infrastructure is never a verdict.** An executor that cannot grade a request (every actor
  that could died) answers it with an ``infra_error`` result, which carries no score or reward,
  and which no cache keeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError, SolutionFileError
from apex_core.executors.requests import ExecutorName, GradedSolution, GradingRequest
from apex_core.grader import GradeCache, GradeResult, GradingLedger, Outcome, allowed_suffixes, provenance
from apex_core.progress import Progress
from apex_core.score import kernel_score
from apex_core.tasks import get_task
from apex_core.tasks.schema import Task

DEFAULT_MAX_IN_FLIGHT = 64
"""Gradings queued or running at once per executor by default: enough to keep a few nodes' GPUs
busy, few enough that a loop submitting thousands holds only this many solutions in memory."""


class ExecutorStats(BaseModel):
    """What an executor has done, for tests, benchmarks and an RL loop's logs."""

    submitted: int = 0
    answered_from_cache: int = 0
    graded: int = 0
    retried: int = 0
    infra_errors: int = 0
    duplicate_submissions: int = 0
    duplicates_dropped: int = 0


class Executor:
    """The common half of the local and the Ray executor (see the module's docstring)."""

    name: ExecutorName

    def __init__(self, cache: GradeCache | None = None, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        if max_in_flight < 1:
            raise ApexUserError(f"max_in_flight {max_in_flight} must be at least 1")
        self.cache = cache or GradeCache()
        self.max_in_flight = max_in_flight
        self.stats = ExecutorStats()
        self._room = threading.Semaphore(max_in_flight)
        self._lock = threading.Lock()
        self._futures: dict[str, Future[GradedSolution]] = {}
        self._closed = False

    # --- what an executor provides --------------------------------------------------------------

    def _check(self, request: GradingRequest, task: Task) -> None:
        """Raise an ApexUserError when ``request`` can never be graded here (placement, device)."""

    def _cached(self, request: GradingRequest, task: Task) -> GradedSolution | None:
        """The request's answer from a cache the executor consults before queueing, if any."""
        return None

    def _enqueue(self, request: GradingRequest, task: Task) -> None:
        raise NotImplementedError

    def _remember(self, request: GradingRequest, task: Task, graded: GradedSolution) -> None:
        """Keep a fresh answer where later submits look (``_cached``)."""

    def _shutdown(self) -> None:
        """Release what the executor started (threads, actors, a Ray instance of its own)."""

    # --- the shared half ------------------------------------------------------------------------

    def submit(self, request: GradingRequest) -> Future[GradedSolution]:
        """Queue ``request``; blocks while ``max_in_flight`` gradings are queued or running.

        Raises ApexUserError at once for a request that cannot be graded (see the module)."""
        with self._lock:
            if self._closed:
                raise ApexUserError(f"this {self.name} executor is closed; start a new one to grade more")
            known = self._futures.get(request.grading_id)
            if known is not None:
                self.stats.duplicate_submissions += 1
                return known
        task = get_task(request.task_id)
        suffix = Path(request.solution.name).suffix
        if suffix not in allowed_suffixes(task):
            raise SolutionFileError(f"solution {request.solution.name} must be a {' or '.join(allowed_suffixes(task))} "
                                    f"file for the {task.language} task {task.id}")
        self._check(request, task)
        hit = self._cached(request, task) if request.use_cache else None
        self._room.acquire()
        future: Future[GradedSolution] = Future()
        future.add_done_callback(lambda _: self._room.release())
        with self._lock:
            known = self._futures.get(request.grading_id)
            if known is not None:  # the same id submitted from another thread meanwhile
                self._room.release()
                self.stats.duplicate_submissions += 1
                return known
            self._futures[request.grading_id] = future
            self.stats.submitted += 1
            if hit is not None:
                self.stats.answered_from_cache += 1
        if hit is not None:
            future.set_result(hit)
        else:
            self._enqueue(request, task)
        return future

    def grade(self, request: GradingRequest) -> GradedSolution:
        """Submit one request and wait for its answer."""
        return self.submit(request).result()

    def grade_many(self, requests: Iterable[GradingRequest]) -> Iterator[GradedSolution]:
        """Answers in the order they finish; requests are drawn from ``requests`` only while fewer
        than ``max_in_flight`` are in flight, so a generator of thousands is never read ahead."""
        pending: set[Future[GradedSolution]] = set()
        for request in requests:
            future = self.submit(request)
            if future not in pending:
                pending.add(future)
            finished = {f for f in pending if f.done()}
            pending -= finished
            yield from (f.result() for f in finished)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from (f.result() for f in finished)

    def _finish(self, request: GradingRequest, task: Task, graded: GradedSolution) -> None:
        """Answer ``request`` once; a later answer for the same grading id is dropped."""
        with self._lock:
            future = self._futures.get(request.grading_id)
            if future is None or future.done():
                self.stats.duplicates_dropped += 1
                return
            if graded.result.outcome is Outcome.infra_error:
                self.stats.infra_errors += 1
            else:
                self.stats.graded += 1
        if request.use_cache and not graded.result.cached and graded.result.outcome is not Outcome.infra_error:
            self._remember(request, task, graded)
        GradingLedger(self.cache.root).record(graded.result)  # a node's verdict, signed here too, for integration here
        future.set_result(graded)

    def _fail(self, request: GradingRequest, error: BaseException) -> None:
        """A request that raised (a user mistake found on the node): its future raises it."""
        with self._lock:
            future = self._futures.get(request.grading_id)
        if future is not None and not future.done():
            future.set_exception(error)

    def close(self) -> None:
        """Stop: queued gradings are answered with an error, and what the executor started ends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            open_futures = [f for f in self._futures.values() if not f.done()]
        self._shutdown()
        for future in open_futures:
            if not future.done():
                future.set_exception(ApexUserError(f"the {self.name} executor was closed before this grading finished"))

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def infra_error_result(task: Task, request: GradingRequest, reason: str) -> GradeResult:
    """The answer for a request the infrastructure could not grade: no verdict on the solution,
    no score, no reward (``rl_reward`` None: an RL loop drops the sample)."""
    made = provenance(task, None, "cpu", request.options.public_seed)
    return GradeResult(
        task_id=task.id,
        solution_path=request.label or request.solution.name,
        outcome=Outcome.infra_error,
        reason=reason,
        compiled=False,
        correct=False,
        score=kernel_score(False, False, None),
        rl_reward=None,
        provenance=made.model_copy(update={"solution_hash": request.solution.sha256}),
        elapsed_s=0.0,
    )


def grade_files(executor: Executor, task_id: str, paths: list[Path], fields: dict[str, object],
                progress: Progress | None = None) -> list[GradedSolution]:
    """Grade files of one task through ``executor``: every file is checked and read before anything
    is submitted (so a missing one fails the call with one line); answers in the files' order.

    ``fields`` holds the other fields of each ``GradingRequest`` (options, target, use_cache)."""
    from apex_core.grader import check_solution_file

    task = get_task(task_id)
    requests = [GradingRequest.for_file(task.id, check_solution_file(task, Path(p)), **fields) for p in paths]
    futures = {executor.submit(request): index for index, request in enumerate(requests)}
    answers: dict[int, GradedSolution] = {}
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in finished:
            index = futures[future]
            answers[index] = future.result()
            if progress is not None:
                where = answers[index].placement
                progress(len(answers) / len(requests),
                         f"{len(answers)} of {len(requests)} graded ({Path(paths[index]).name}: {where.host}, {where.actor})")
    return [answers[i] for i in range(len(requests))]
