"""The Ray executor: gradings spread over the GPUs of a Ray cluster, one grading actor per GPU.

**Actors.** At start the executor reads the cluster's live nodes and places, on each, one
``GradingActor`` per GPU Ray counts there (``num_gpus=1``, pinned to the node), and on nodes
without GPUs ``cpu_actors_per_node`` actors for the CPU tasks. Each actor reports what it runs on,
found by our own devices module (arch, product, the environment fingerprint); an actor that does
not start within ``start_timeout_s`` (its GPU held by another job) is left out with a warning.

**Placement.** A request's ``target`` (an arch or product: gfx950, sm_90, mi355x, h200) limits a
GPU task to actors whose GPU has that arch; none in the cluster fails ``submit`` with one line
naming what the cluster has. Without a target a GPU task goes to any GPU actor (to CPU actors
only where the cluster has no GPU: the grader then runs it as it would here, in Triton's
interpreter); CPU tasks go to any actor. Each actor grades one request at a time; the dispatcher
gives the oldest waiting request to the first idle actor that may take it.

**Caches.** Two layers, both the signed ``GradeCache`` keyed exactly as ``apex grade`` keys it
(task hash, solution hash, environment fingerprint, grader version, measuring options). The
driver's cache is consulted before submitting, under the fingerprint of every actor that could
take the request, so a verdict is reused only where it was measured on an identical
environment; fresh verdicts are written to it. Each actor also grades through its node's own
cache (``service.grade_cached``), which also keeps that node's baseline drift records; so a
driver that never saw a verdict still gets it from the node that measured it.

**Faults.** An actor or node that dies with a grading in flight is not a verdict on the
solution: the request goes back to the front of the queue for another actor (``max_attempts`` runs
in all); when none is left, the answer is an ``infra_error`` (no score, no reward, never cached).
Each grading id is answered once (``base.Executor``).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import apex_core
from apex_core.errors import ApexUserError, UnknownNameError
from apex_core.executors.actor import ActorFacts, ActorReply, GradingActor
from apex_core.executors.base import DEFAULT_MAX_IN_FLIGHT, Executor, infra_error_result
from apex_core.executors.requests import GradedSolution, GradingRequest, Placement
from apex_core.grader import GradeCache, cache_key
from apex_core.hardware.target import spec_for_name
from apex_core.tasks.schema import Task

log = logging.getLogger(__name__)

RAY_MISSING = ("the ray executor needs Ray, which is not installed: pip install 'apex-kernels[ray]' "
               "(bash setup.sh installs it), or use --executor local")
NAMESPACE = "apex"
POLL_S = 0.05
"""How long the dispatcher waits for a finished grading before it looks at the queue again."""


def require_ray() -> ModuleType:
    """The ``ray`` module, or an ApexUserError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ApexUserError(RAY_MISSING) from None
    return ray


def local_temp_dir() -> str:
    """Where a Ray started by Apex on this machine keeps its sessions: one folder per user, so that
    two users' Ray instances on one machine keep apart (Ray's default, /tmp/ray, is one folder
    for all users, with one session_latest link). Ray makes the folder writable by everyone either way."""
    return os.path.join(tempfile.gettempdir(), f"apex-ray-{os.geteuid()}")


CONNECT_TIMEOUT_S = 10.0
"""How long a cluster's address may take to accept a TCP connection: Ray's own join waits minutes
on an address where nothing listens."""


def check_reachable(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """One line, within ``timeout_s``, when nothing listens at ``address`` (``host:port`` or
    ``ray://host:port``); addresses without a port ("auto", "local") are left to Ray."""
    if not address or address in ("auto", "local"):
        return
    bare = address.split("://", 1)[-1].rstrip("/")
    host, _, port = bare.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ApexUserError(f"cannot reach the Ray cluster at {address} (nothing answered on port {port} within "
                            f"{timeout_s:g} s: {error.strerror or type(error).__name__}); start one there with "
                            "'ray start --head', or leave --ray-address out to run Ray on this machine") from None


def connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` (or RAY_ADDRESS), or start Ray on this machine when
    neither is given; reuse a connection the process already has. True when Ray was started or
    joined here (so ``close`` disconnects), False when it was already connected."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    check_reachable(address)
    settings: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address is None:
            ray.init(address="local", include_dashboard=False, _temp_dir=local_temp_dir(), **settings)
        else:
            ray.init(address=address, **settings)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = address or "this machine"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ApexUserError(f"cannot reach the Ray cluster at {where} ({first}); start one there with "
                            "'ray start --head', or leave --ray-address out to run Ray on this machine") from None
    return True


def target_arch(target: str) -> str:
    """The arch a target names: a product or arch of the spec table, else the name as given."""
    try:
        return spec_for_name(target).arch
    except UnknownNameError:
        return target.strip().lower()


@dataclass
class _Actor:
    handle: Any
    facts: ActorFacts
    busy: str | None = None
    dead: bool = False


@dataclass
class _Job:
    request: GradingRequest
    task: Task
    attempts: int = 0
    tried: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=1)
def _actor_class() -> Any:
    return require_ray().remote(GradingActor)


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, address: str | None = None, cache: GradeCache | None = None,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, max_attempts: int = 3, max_actors: int | None = None,
                 cpu_actors_per_node: int = 1, actor_cpus: float = 1.0, node_cache_dir: str | None = None,
                 start_timeout_s: float = 300.0) -> None:
        """``address``: a cluster (``ray://`` or ``host:port``; default RAY_ADDRESS, else Ray on this
        machine). ``max_actors`` caps the actors (GPU ones first: a benchmark's GPU count).
        ``node_cache_dir``: each node's cache folder (default: the node's own ``~/.cache/apex``)."""
        super().__init__(cache, max_in_flight)
        if max_attempts < 1:
            raise ApexUserError(f"max_attempts {max_attempts} must be at least 1")
        self.ray = require_ray()
        self.max_attempts = max_attempts
        self.host = socket.gethostname()
        self._owns_ray = connect(address)
        self._actors: dict[str, _Actor] = {}
        self._waiting: deque[_Job] = deque()
        self._running: dict[Any, tuple[_Job, str]] = {}
        self._wake = threading.Event()
        try:
            self._start_actors(max_actors, cpu_actors_per_node, actor_cpus, node_cache_dir, start_timeout_s)
        except BaseException:
            self._shutdown()
            raise
        self._dispatcher = threading.Thread(target=self._dispatch, name="apex-ray-dispatcher", daemon=True)
        self._dispatcher.start()

    # --- actors -----------------------------------------------------------------------------------

    def _start_actors(self, max_actors: int | None, cpu_actors_per_node: int, actor_cpus: float,
                      node_cache_dir: str | None, start_timeout_s: float) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        plans: list[tuple[str, bool, str]] = []  # (actor name, on a GPU, node id)
        for node in sorted((n for n in self.ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"]):
            host = node.get("NodeManagerHostname") or node["NodeID"][:8]
            gpus = int(node.get("Resources", {}).get("GPU", 0))
            if gpus:
                plans += [(f"{host}-gpu{i}", True, node["NodeID"]) for i in range(gpus)]
            else:
                plans += [(f"{host}-cpu{i}", False, node["NodeID"]) for i in range(cpu_actors_per_node)]
        plans.sort(key=lambda plan: not plan[1])
        plans = plans[:max_actors] if max_actors else plans
        if not plans:
            raise ApexUserError("the Ray cluster has no live node to grade on; add one with 'ray start --address HEAD:6379'")
        handles = {}
        for name, on_gpu, node_id in plans:
            handles[name] = _actor_class().options(
                num_gpus=1 if on_gpu else 0, num_cpus=actor_cpus, max_restarts=0, max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(name, on_gpu, node_cache_dir, os.environ.get("OMP_NUM_THREADS"))
        pending = {handle.facts.remote(): name for name, handle in handles.items()}
        ready, late = self.ray.wait(list(pending), num_returns=len(pending), timeout=start_timeout_s)
        for ref in ready:
            name = pending[ref]
            try:
                self._actors[name] = _Actor(handles[name], self.ray.get(ref))
            except self.ray.exceptions.RayError as error:
                log.warning("grading actor %s did not start: %s", name, _gist(error))
                self.ray.kill(handles[name])
        for ref in late:
            log.warning("grading actor %s did not start within %.0f s (its GPU or CPU may be held by another job); "
                        "going on without it", pending[ref], start_timeout_s)
            self.ray.kill(handles[pending[ref]])
        if not self._actors:
            raise ApexUserError(f"no grading actor started on the Ray cluster within {start_timeout_s:.0f} s "
                                "(are its GPUs held by other jobs? is Apex installed on its nodes?)")

    def actors(self) -> list[ActorFacts]:
        """The live grading actors and what each runs on."""
        with self._lock:
            return [a.facts for a in self._actors.values() if not a.dead]

    def where(self, grading_id: str) -> str | None:
        """The actor a grading is running on now, if it is running."""
        with self._lock:
            return next((label for job, label in self._running.values() if job.request.grading_id == grading_id), None)

    def actor_handle(self, name: str) -> Any:
        return self._actors[name].handle

    def cluster_summary(self) -> str:
        """What the cluster offers, in one line: '2 x sm_90 (NVIDIA H200) on 1 node; 1 CPU actor on 1 node'."""
        kinds: dict[str, tuple[int, set[str]]] = {}
        for actor in self.actors():
            kind = f"{actor.arch} ({actor.gpu})" if actor.arch else "CPU actor"
            count, nodes = kinds.get(kind, (0, set()))
            kinds[kind] = (count + 1, nodes | {actor.node})
        return "; ".join(f"{count} x {kind} on {len(nodes)} node(s)" for kind, (count, nodes) in sorted(kinds.items())) or "no live actor"

    def _eligible(self, request: GradingRequest, task: Task) -> list[str]:
        """The live actors that may grade ``request`` (see the module's Placement)."""
        live = {name: a.facts for name, a in self._actors.items() if not a.dead}
        if not task.needs_gpu:
            return list(live)
        if request.target is None:
            on_gpu = [name for name, facts in live.items() if facts.arch]
            return on_gpu or list(live)
        arch = target_arch(request.target)
        return [name for name, facts in live.items() if facts.arch == arch]

    # --- what the base asks for ----------------------------------------------------------------

    def _check(self, request: GradingRequest, task: Task) -> None:
        if request.options.device is not None:
            raise ApexUserError("a device picks a GPU of this machine; on Ray each grading actor owns one GPU: "
                                "leave --device out (use a target such as --gpu sm_90 to choose the kind)")
        with self._lock:
            eligible = self._eligible(request, task)
        if not eligible:
            raise ApexUserError(f"no node of the Ray cluster has a {target_arch(request.target or '')} GPU for {task.id}; "
                                f"the cluster has: {self.cluster_summary()}")

    def _cached(self, request: GradingRequest, task: Task) -> GradedSolution | None:
        with self._lock:
            actors = [self._actors[name].facts for name in self._eligible(request, task)]
        task_hash = task.content_hash()
        for environment in dict.fromkeys(a.environment_key(task.needs_gpu) for a in actors):
            hit = self.cache.get(cache_key(task_hash, request.solution.sha256, environment, request.options))
            if hit is not None:
                result = hit.model_copy(update={"cached": True, "solution_path": request.label or request.solution.name})
                return GradedSolution(grading_id=request.grading_id, task_id=task.id, result=result,
                                      placement=Placement(executor="ray", node="cache", host=self.host, actor="cache", attempts=0))
        return None

    def _remember(self, request: GradingRequest, task: Task, graded: GradedSolution) -> None:
        made = graded.result.provenance
        if made.task_hash != task.content_hash() or made.grader_version != apex_core.__version__:
            return  # graded by a node whose Apex differs from ours: our key would misname it
        self.cache.put(cache_key(made.task_hash, made.solution_hash, made.environment_key, request.options), graded.result)

    def _enqueue(self, request: GradingRequest, task: Task) -> None:
        with self._lock:
            self._waiting.append(_Job(request, task))
        self._wake.set()

    # --- the dispatcher -------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while not self._closed:
            try:
                self._assign()
                if self._running:
                    ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
                    for ref in ready:
                        self._collect(ref)
                else:
                    self._wake.wait(POLL_S)
                    self._wake.clear()
            except Exception:  # the dispatcher must outlive any one grading's trouble
                if self._closed:
                    return
                log.exception("the Ray dispatcher hit an error; it goes on")

    def _assign(self) -> None:
        """Give waiting jobs to idle actors, oldest first; answer jobs no live actor can take."""
        started: list[tuple[_Job, str]] = []
        unplaceable: list[_Job] = []
        with self._lock:
            still: deque[_Job] = deque()
            while self._waiting:
                job = self._waiting.popleft()
                eligible = self._eligible(job.request, job.task)
                if not eligible:
                    unplaceable.append(job)
                    continue
                idle = [name for name in eligible if self._actors[name].busy is None]
                fresh = [name for name in idle if name not in job.tried]
                choice = (fresh or idle or [None])[0]
                if choice is None:
                    still.append(job)
                    continue
                self._actors[choice].busy = job.request.grading_id
                job.attempts += 1
                started.append((job, choice))
            self._waiting = still
        for job in unplaceable:
            reason = (f"no live grading actor can take it ({'; '.join(job.failures) or 'every eligible actor died'}); "
                      "this is the cluster's failure, not the solution's: submit it again")
            self._answer_infra(job, reason)
        for job, name in started:
            try:
                ref = self._actors[name].handle.grade.remote(job.request)
            except Exception as error:  # the call could not even be sent: as if the actor had gone
                self._lost(job, name, error)
                continue
            with self._lock:
                self._running[ref] = (job, name)

    def _collect(self, ref: Any) -> None:
        exceptions = self.ray.exceptions
        with self._lock:
            job, name = self._running.pop(ref)
            actor = self._actors[name]
            actor.busy = None
        try:
            reply: ActorReply = self.ray.get(ref)
        except exceptions.RayTaskError as error:  # our own code failed inside the actor: no retry would differ
            self._answer_infra(job, f"the grading actor {name} failed: {_gist(error)}")
            return
        except exceptions.RayError as error:  # the actor, its process or its node went away
            self._lost(job, name, error)
            return
        except Exception as error:  # an answer that cannot be read is no verdict either
            self._answer_infra(job, f"the answer of grading actor {name} could not be read: {_gist(error)}")
            return
        if reply.user_error is not None or reply.result is None:
            self._fail(job.request, ApexUserError(reply.user_error or f"actor {name} returned no result"))
            return
        placement = Placement(executor="ray", node=reply.node, host=reply.host, actor=reply.actor, attempts=job.attempts)
        self._finish(job.request, job.task, GradedSolution(grading_id=job.request.grading_id, task_id=job.task.id,
                                                           result=reply.result, placement=placement))

    def _lost(self, job: _Job, name: str, error: Exception) -> None:
        """The job's actor (or its process, or node) went away: queue it again for another actor
        while attempts are left, else answer it with an infra error."""
        exceptions = self.ray.exceptions
        with self._lock:
            if isinstance(error, exceptions.RayActorError) and not isinstance(error, exceptions.ActorUnavailableError):
                self._actors[name].dead = True
            job.tried.add(name)
            job.failures.append(f"attempt {job.attempts} on {name}: {type(error).__name__}")
            again = job.attempts < self.max_attempts
            if again:
                self.stats.retried += 1
                self._waiting.appendleft(job)
        log.warning("grading %s: actor %s failed (%s)%s", job.request.grading_id, name, type(error).__name__,
                    ", retrying elsewhere" if again else "")
        if not again:
            self._answer_infra(job, f"every attempt ended with its actor or node gone ({'; '.join(job.failures)}); "
                                    "this is the cluster's failure, not the solution's: submit it again")

    def _answer_infra(self, job: _Job, reason: str) -> None:
        result = infra_error_result(job.task, job.request, reason)
        placement = Placement(executor="ray", node="none", host=self.host, actor="none", attempts=job.attempts)
        self._finish(job.request, job.task, GradedSolution(grading_id=job.request.grading_id, task_id=job.task.id,
                                                           result=result, placement=placement))

    def _shutdown(self) -> None:
        self._closed = True
        self._wake.set()
        dispatcher = getattr(self, "_dispatcher", None)
        if dispatcher is not None:
            dispatcher.join(timeout=10)
        for actor in self._actors.values():
            try:
                self.ray.kill(actor.handle)
            except Exception:  # already gone
                pass
        if self._owns_ray:
            self.ray.shutdown()


def _gist(error: BaseException) -> str:
    """The last line of an error's text: for a failure inside an actor, the exception after its traceback."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(error).__name__
