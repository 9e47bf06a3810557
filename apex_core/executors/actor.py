"""Grading a solution that arrived as content, and the grading actor that does it on a Ray node.

``grade_content`` writes the bytes into a private folder and hands the file to the same cached
grading ``apex grade`` uses (``service.grade_cached``): the judge, its sandboxed workers, the warm
pool, the node's own signed cache and baseline records. Nothing about the grader's isolation
changes: this process never imports the candidate, which runs in the judge's confined workers.

``GradingActor`` is a plain class; the Ray executor makes it an actor (``ray.remote``), one per
GPU with ``num_gpus=1`` (Ray then shows the actor that GPU alone, as ``cuda:0``), or one per CPU
slot on nodes without GPUs. Ray is imported only inside its methods, so this module loads without it.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections import OrderedDict
from pathlib import Path

from pydantic import BaseModel

import apex_core
from apex_core.errors import ApexUserError
from apex_core.executors.requests import GradingRequest
from apex_core.grader import GradeCache, GradeResult, detected_device, environment, environment_key_for, gpu_count, grade_cached
from apex_core.tasks import get_task

REMEMBERED = 1024
"""Answers an actor keeps by grading id, so that a request delivered to it twice is graded once."""


def grade_content(request: GradingRequest, cache: GradeCache) -> GradeResult:
    """Grade the request's solution bytes (from ``cache`` where they were graded before).

    The bytes go into a folder of their own, new and private (``mkdtemp``: 0700), so no other user
    of the machine can put a file where the grading reads one; it is removed afterwards, so an
    actor killed by Ray leaves at most the folder of the grading it was killed in."""
    task = get_task(request.task_id)
    folder = Path(tempfile.mkdtemp(prefix="apex-grading-"))
    try:
        path = folder / request.solution.name
        path.write_bytes(request.solution.content)
        result = grade_cached(task, path, request.options, cache, request.use_cache,
                              environment_key_for(task, request.options), task.content_hash())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return result.model_copy(update={"solution_path": request.label or request.solution.name})


class ActorFacts(BaseModel):
    """What an actor found about itself when it started, with our own devices module."""

    name: str
    node: str
    host: str
    pid: int
    gpu: str | None
    """The product name of the actor's GPU; None for an actor on a node without GPUs."""
    arch: str | None
    """gfx950, sm_90, ...: what a request's target is matched against; None without a GPU."""
    cpu_environment_key: str
    gpu_environment_key: str | None
    apex_version: str
    omp_num_threads: str | None = None
    """OMP_NUM_THREADS as the judge's processes inherit it: the driver's, not Ray's cap of 1."""

    def environment_key(self, on_gpu: bool) -> str:
        return self.gpu_environment_key if on_gpu and self.gpu_environment_key else self.cpu_environment_key


def grade_with_the_hosts_threads(omp_threads: str | None) -> None:
    """Undo Ray's thread cap, so that a grading here runs as ``apex grade`` would on this host.

    Ray sets ``OMP_NUM_THREADS`` in every worker to the actor's ``num_cpus`` (1 here), and the
    judge's worker processes inherit it: their CPU-side work (inputs, reference checks) would run on
    one thread where the local executor's use the host's cores. On the H200 (2026-12-02, before this)
    the Ray executor's gradings were 0.2-0.7 s slower at the median, most of it in the timing phase.
    ``omp_threads`` is the driver's own setting, kept when the user chose one.
    """
    if omp_threads is not None:
        os.environ["OMP_NUM_THREADS"] = omp_threads
        return
    os.environ.pop("OMP_NUM_THREADS", None)
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:  # already imported under the cap: give it the cores this process may use
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


class ActorReply(BaseModel):
    """What a grading actor sends back: the result, or the user's mistake it found."""

    result: GradeResult | None = None
    user_error: str | None = None
    node: str
    host: str
    actor: str


class GradingActor:
    """One grader on one device of one node (see the module's docstring)."""

    def __init__(self, name: str, wants_gpu: bool, cache_dir: str | None = None, omp_threads: str | None = None) -> None:
        grade_with_the_hosts_threads(omp_threads)
        self.name = name
        self.wants_gpu = wants_gpu
        self.cache = GradeCache(Path(cache_dir)) if cache_dir else GradeCache()
        self.answers: OrderedDict[str, ActorReply] = OrderedDict()

    def facts(self) -> ActorFacts:
        import ray

        gpus = gpu_count() if self.wants_gpu else 0
        if self.wants_gpu and gpus != 1:
            raise RuntimeError(f"actor {self.name} was given one GPU by Ray but torch sees {gpus}")
        device = detected_device() if gpus else None
        return ActorFacts(
            name=self.name, node=ray.get_runtime_context().get_node_id(), host=socket.gethostname(), pid=os.getpid(),
            gpu=device.product_name if device else None, arch=device.arch if device else None,
            cpu_environment_key=environment(False).key(),
            gpu_environment_key=environment(True).key() if gpus else None,
            apex_version=apex_core.__version__, omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        )

    def grade(self, request: GradingRequest) -> ActorReply:
        """Grade one request; the same grading id again gets the answer it got the first time."""
        import ray

        known = self.answers.get(request.grading_id)
        if known is not None:
            return known
        where = {"node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(), "actor": self.name}
        try:
            reply = ActorReply(result=grade_content(request, self.cache), **where)
        except ApexUserError as mistake:
            reply = ActorReply(user_error=str(mistake), **where)
        self.answers[request.grading_id] = reply
        while len(self.answers) > REMEMBERED:
            self.answers.popitem(last=False)
        return reply
