"""One grading's state and its workers: what every stage of a grading reads and adds to.

A ``Grading`` is created by the judge for one (task, solution, options); the stages
(``correctness``, ``calibration``, ``timing``, ``timed_checks``, ``magpie.grading``) take it as
their first argument, and ``verdict`` builds the result from it. It owns the baseline's worker
it checked out until ``close``; the solution's workers belong to the stage that started them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from apex_core.grader import fingerprint, slots
from apex_core.grader.cache import default_cache_dir
from apex_core.grader.compare import as_output_list
from apex_core.grader.options import GradeOptions
from apex_core.grader.isolation import protocol
from apex_core.grader.isolation.device_memory import release_cached_device_memory
from apex_core.grader.isolation.payload import imported_torch
from apex_core.grader.isolation.process import WorkerFailure, WorkerProcess, WorkerSpec, sandbox_identity
from apex_core.grader.result import Outcome, ShapeCheck, ShapeTiming
from apex_core.grader.solution_file import file_hash
from apex_core.grader.state import STATE
from apex_core.hardware.detect import DetectedDevice
from apex_core.hardware.specs import GpuSpec
from apex_core.hardware.target import spec_for_detected
from apex_core.progress import Progress, reporter
from apex_core.kernels import seeded
from apex_core.kernels.roofline import Roofline
from apex_core.tasks.schema import DEFAULT_INPUT_SETS, Shape, Task, load_reference

STAGED_BYTES = 256 * 1024**2
"""Input bytes per timed shape beyond which fewer distinct input sets are drawn (at least 2)."""
PAYLOAD_SLACK_BYTES = 1 << 20
"""Room for a payload's header and alignment beyond its arrays' bytes."""
SIDE_BY_SIDE_BYTES = 256 * 1024**2
"""A timing grading loads and checks correctness beside other gradings (holding its device shared)
only on the CPU and where no call it checks moves more than this (roofline bytes); otherwise it
holds the device exclusively from its first stage to its last, as every timing grading once did.
Side by side, sixteen gradings of a task whose inputs run to gigabytes (Kimi K2's MoE: 33.5 GiB a
set) would run the GPU out of memory, and a solution would be blamed for the memory of others."""


class GradingFailed(Exception):
    """A stage's verdict that ends the grading: the outcome and the reason the result reports."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


@contextlib.contextmanager
def _judge_device_memory(doing: str) -> Iterator[None]:
    """The device running out of memory in the judge's own work is an infra_error of this grading,
    not a crash of the process grading it: a task's inputs drawn in the judge, in the solution's
    worker and in the baseline's can outgrow one GPU (Kimi K2's 384-expert MoE: 33.5 GiB a set, on
    an 80 GB H100, 2026-12-06), and `apex tasks verify`, an MCP server or an RL grader must go on
    to the next grading."""
    try:
        yield
    except Exception as error:
        torch = imported_torch()
        if torch is None or not isinstance(error, torch.OutOfMemoryError):
            raise
        said = str(error).split(" Including", 1)[0].split(" Of the allocated", 1)[0].strip()
        raise GradingFailed(
            Outcome.infra_error,
            f"the device ran out of memory in the judge while {doing} ({said}); the task's inputs in the judge "
            "and in both workers do not fit on this GPU beside what else runs there: grade it on a GPU with "
            "more memory, or with fewer gradings at once",
        ) from None


def machine() -> tuple[DetectedDevice, GpuSpec | None]:
    """The detected device and its hardware model (None where the model does not know it)."""
    device = fingerprint.detected_device()
    return device, spec_for_detected(device)


def case_seed(public: int, secret: int, shape_index: int, k: int) -> int:
    """The seed of one case: public and secret seeds mixed, so no input is predictable from the
    public seed alone."""
    digest = hashlib.sha256(f"{public}:{secret}:{shape_index}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def payload_limit(expected: list[Any]) -> int:
    """The most bytes a worker's reply may carry when the outputs should look like ``expected``."""
    return sum(int(output.nbytes) for output in expected) + PAYLOAD_SLACK_BYTES


def require_ok(reply: dict[str, Any], name: str) -> None:
    """A failed reply ends the grading: the solution's as its runtime error, the baseline's as ours."""
    if not reply.get("ok"):
        outcome = Outcome.runtime_error if name == "solution" else Outcome.infra_error
        prefix = "" if name == "solution" else "the baseline failed: "
        raise GradingFailed(outcome, prefix + str(reply.get("message")))


def _timing_cpu(device: str) -> int | None:
    """One core for both workers of a grading: the last one for GPU 0 (or the CPU), the one
    before it for GPU 1, and so on, so gradings on different GPUs do not share a core."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
    core = cores[-1 - (index % len(cores))]
    STATE.timing_cores.add(core)
    return core


class Grading:
    """State of one grading: what the result model is built from."""

    def __init__(self, task: Task, solution: Path, options: GradeOptions, progress: Progress | None = None) -> None:
        self.progress = reporter(progress)
        self.task = task
        self.solution = solution
        self.options = options
        self.started = time.monotonic()
        self.secret_seed = secrets.randbits(32)
        self.device = self._choose_device()
        self.extra_env: dict[str, str] = {}
        self.flags: list[str] = []
        self.checks: list[ShapeCheck] = []
        self.timings: list[ShapeTiming] = []
        self.make_inputs = load_reference(task.inputs)
        self.reference = load_reference(task.reference)
        self.roofline = load_reference(task.roofline)
        # Why the profiler found that the solution's own kernels did not do the work ('' if they did).
        self.no_custom_kernel = ""
        # Bootstrap draws of each timed shape's speedup, combined into the overall interval.
        self.speedup_draws: list[Any] = []
        # Timed shape index -> the solution's worker's shift there (its time of our baseline over
        # the baseline worker's) and bootstrap draws of it; see ``calibration``.
        self.corrections: dict[int, tuple[float, np.ndarray]] = {}
        self.calibrated_worker: WorkerProcess | None = None
        self.stage_token = secrets.token_hex(4)
        # The baseline's worker of this grading, its own until ``close``.
        self._baseline: WorkerProcess | None = None
        self._baseline_healthy = True
        self._hold: slots.DeviceHold | None = None
        self.phases: dict[str, float] = {}
        self.timing_method = ""
        self.interpreted = False
        if task.language == "triton" and self.device == "cpu":
            # No GPU: Triton kernels run in the interpreter, which checks correctness but says
            # nothing about speed.
            self.extra_env["TRITON_INTERPRET"] = "1"
            self.interpreted = True

    def close(self) -> None:
        """Give the baseline's worker back to the pool if it is healthy, else close it; then
        return the device memory the judge cached for this grading's references.

        A worker going back to the pool first lets go of its staged inputs (``Release``): the
        next grading stages afresh, and an idle worker holding a large task's inputs starves the
        workers of the tasks after it (``device_memory``).
        """
        if self._hold is not None:
            self._hold.close()
        worker, self._baseline = self._baseline, None
        if worker is not None:
            if self.options.warm_pool and self._baseline_healthy and worker.alive() and self._released(worker):
                STATE.baseline_workers.give_back(self._baseline_key(), worker)
            else:
                worker.close()
        if self.on_gpu:
            release_cached_device_memory(imported_torch())

    @staticmethod
    def _released(worker: WorkerProcess) -> bool:
        """Whether ``worker`` let go of its stages; one that cannot is not worth keeping."""
        try:
            reply, _ = worker.request(protocol.Release())
        except WorkerFailure:
            return False
        return bool(reply.get("ok"))

    def _choose_device(self) -> str:
        from apex_core.grader.devices import grading_device  # also checked before any cache lookup

        return grading_device(self.task, self.options.device)

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    @property
    def times(self) -> bool:
        """Whether this grading measures speed (not in the CPU interpreter, whose speed means nothing)."""
        return self.options.timing and not self.interpreted

    @functools.cached_property
    def _checks_side_by_side(self) -> bool:
        """Whether the stages that do not measure may share the device with other gradings.

        Only on the CPU, for now: on an H100 (2026-12-06), 16 and 4 distinct candidates graded at
        once with their checks side by side gave 881 and 920 gradings an hour against 992 one at a
        time, since the stages that measure (2.5-2.8 s of each grading) bound the device and ran
        10-15% slower beside the others' host work; on this 2-core CPU machine 18 gradings at once
        through the MCP server gave 17% more (docs/benchmarks.md). And only where no checked call
        moves more than ``SIDE_BY_SIDE_BYTES``."""
        if self.on_gpu:
            return False
        checked = [*self.task.test_shapes, *(self.task.hidden_shapes if self.options.hidden_shapes else [])]
        return max(self.call_bytes(shape) for shape in checked) <= SIDE_BY_SIDE_BYTES

    @contextlib.contextmanager
    def on_device(self, exclusive: bool = False) -> Iterator[None]:
        """This grading's hold on its device for one stage (``slots.DeviceHold``): exclusive to
        measure, shared otherwise, or, for a timing grading that does not check side by side,
        exclusive from its first stage until ``close``. The wait counts as the "queue" phase;
        while queued, the progress says so."""
        throughout = self.times and not self._checks_side_by_side
        if self._hold is None:
            self._hold = slots.DeviceHold(self.device, report=lambda line: self.progress(0.0, line))
            if throughout:
                with self.phase("queue"):
                    self._hold.take(exclusive=True)
        if throughout:
            yield
            return
        with self.phase("queue"):
            self._hold.take(exclusive)
        try:
            yield
        finally:
            self._hold.let_go()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Accumulate the wall time spent in one stage of the grading (reported in the result)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - started, 3)

    # --- workers -----------------------------------------------------------------------------------

    def worker(self, path: Path, compile_cache: Path | None = None, trusted: bool = False) -> WorkerProcess:
        """A started worker with ``path`` loaded; a load failure is raised as the solution's own."""
        worker = self.start_worker(trusted)
        if trusted and compile_cache is None:
            # Our own baseline compiles once per content, into a cache only the judge's user can
            # write: a solution (sandbox user) must not be able to swap the baseline's kernels.
            compile_cache = self.baseline_compile_cache()
        self.load_into(worker, path, compile_cache)
        return worker

    def start_worker(self, trusted: bool = False) -> WorkerProcess:
        spec = self.worker_spec(trusted)
        if self.options.warm_pool:
            # Trusted (baseline) workers come from the pool too: their spec keeps them apart.
            worker = STATE.worker_pool.take(spec, self.options.timeout_s)
            STATE.worker_pool.prepare(spec)  # replacements start now, on cores away from the timing core
            return worker
        return STATE.start_worker(spec, self.options.timeout_s)

    def load_into(self, worker: WorkerProcess, path: Path, compile_cache: Path | None) -> None:
        """Load ``path`` into ``worker``; the worker is closed if that fails."""
        try:
            inputs = {"ref": self.task.inputs, "dtype": self.task.dtype, "params": self.task.params}
            reply = worker.load(path, self.task.entry_point, compile_cache, self.task.output_args, inputs)
        except BaseException:
            worker.close()
            raise
        if not reply.get("ok"):
            worker.close()
            if path == self.task.baseline_path:
                raise GradingFailed(Outcome.infra_error, f"the baseline does not load: {reply.get('message')}")
            kind = Outcome.infra_error if reply.get("kind") == "infra_error" else Outcome.compile_error
            raise GradingFailed(kind, str(reply.get("message")))

    @contextlib.contextmanager
    def baseline_worker(self) -> Iterator[WorkerProcess]:
        """The worker timing the baseline: this grading's alone, from its first use to ``close``.

        It only ever runs our own baseline, so with the pool on it lives across gradings: no
        process start, import or compile per grading. It runs as the judge's user, out of a
        solution's reach. A failure while it is in use retires it.
        """
        if self._baseline is None or not self._baseline.alive():
            if self._baseline is not None:
                self._baseline.close()
            worker = STATE.baseline_workers.check_out(self._baseline_key()) if self.options.warm_pool else None
            self._baseline = worker or self.worker(self.task.baseline_path, trusted=True)
        try:
            yield self._baseline
        except BaseException:
            self._baseline_healthy = False
            raise

    def _baseline_key(self) -> tuple[str, str, WorkerSpec]:
        return (self.task.id, self.task.content_hash(), self.worker_spec(trusted=True))

    def worker_spec(self, trusted: bool = False) -> WorkerSpec:
        return WorkerSpec(
            trusted=trusted,
            library=self.task.array_library,
            device=self.device,
            extra_env=tuple(sorted(self.extra_env.items())),
            cpu=_timing_cpu(self.device) if self.options.timing else None,  # pinned only to be timed
            memory_bytes=self.options.memory_bytes,
            # An address-space cap is safe for NumPy workers only: GPU runtimes reserve huge ranges.
            limit_address_space=self.task.array_library == "numpy",
            unconfined=self.options.unconfined,
        )

    def candidate_cache(self) -> Path:
        """The solution's own compile cache: keyed by its content, so only it can be affected.

        When solutions run as an unprivileged user, the cache sits where that user can reach it.
        """
        digest = file_hash(self.solution)[:16]
        root = Path(tempfile.gettempdir()) / "apex-compile" if sandbox_identity() else default_cache_dir() / "compile"
        return root / digest

    def baseline_compile_cache(self) -> Path:
        """Where our baseline's kernels are compiled: a cache only the judge's user can write."""
        return default_cache_dir() / "baseline-compile" / file_hash(self.task.baseline_path)[:16]

    # --- inputs and references ---------------------------------------------------------------------

    def input_sets(self, shape: Shape) -> int:
        """Distinct input sets per timed shape: the options' count, scaled down for large inputs.

        Drawing, sending and staging the sets dominated a grading's time at large shapes; beyond
        STAGED_BYTES of inputs per shape more sets add cost, while the cache flush already keeps
        every call cold.
        """
        count = max(2, round(self.options.inputs_per_shape * self.task.timing_input_sets / DEFAULT_INPUT_SETS))
        set_bytes = self.call_bytes(shape)
        if set_bytes > 0:
            hardened = self.options.inputs_per_shape // DEFAULT_INPUT_SETS or 1
            count = min(count, max(2, hardened * STAGED_BYTES // set_bytes))
        return count

    def call_bytes(self, shape: Shape) -> int:
        """Bytes one call moves at ``shape`` (reads and writes), from the task's roofline model."""
        model: Roofline = self.roofline(shape, self.task.dtype, self.task.params)
        return model.bytes_moved

    def floor_ns(self, shape: Shape, spec: GpuSpec | None) -> float | None:
        """The hardware's lower bound for one call at ``shape`` (roofline), on a GPU the model knows."""
        if spec is None or not self.on_gpu:
            return None
        model: Roofline = self.roofline(shape, self.task.dtype, self.task.params)
        return model.floor_seconds(spec, self.task.dtype) * 1e9

    def inputs(self, shape: Shape, seed: int) -> list[Any]:
        """The input set of ``seed``, drawn on the grading device (the workers draw the same)."""
        with _judge_device_memory(f"drawing the inputs of {shape}"):
            return seeded.draw(self.make_inputs, shape, self.task.dtype, seed, self.device, self.task.params)

    def expected(self, args: list[Any]) -> list[Any]:
        """The reference's outputs for ``args`` (drawn for it alone, on the grading device).

        They stay on that device: comparisons run there (see ``compare``).
        """
        with _judge_device_memory("computing the reference's outputs"):
            return as_output_list(self.reference(*args))

    # --- what the calibration hands to the timing --------------------------------------------------

    def kept_stage(self, index: int) -> str:
        """The name under which both workers keep the stage of timed shape ``index`` from the
        calibration to the timing (unique to this grading)."""
        return f"{self.stage_token}-{index}"

    def baseline_median_key(self, shape: Shape) -> tuple[str, str, str, tuple[tuple[str, int], ...]]:
        """Key of the baseline's median at ``shape`` in ``STATE.baseline_medians``."""
        return (self.task.id, self.task.content_hash(), self.device, tuple(sorted(shape.items())))
