"""The judge: grades one solution file against a task, never importing the solution itself.

Correctness: every test and hidden shape, several seeds drawn from a public seed mixed with a
secret one, reference computed here, outputs compared here, input mutation detected. Timing:
baseline and solution in two workers, interleaved in alternating order, warm-up first, distinct
inputs per call, device caches flushed before every GPU sample, repeated until the medians are
stable or the budget is spent; the speedup counts only when its bootstrap interval excludes 1.0.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import numpy as np
from pydantic import BaseModel, Field

import apex_core
from apex_core.errors import ApexUserError, SolutionFileError
from apex_core.grader import digest, fingerprint, integrity, native, prescan, protocol, slots, stats, trace_checks, wall_clock
from apex_core.kernels import seeded
from apex_core.grader.fingerprint import Clocks
from apex_core.grader.compare import Comparison, as_float64, as_output_list, compare_all, dtype_name
from apex_core.grader.cache import default_cache_dir
from apex_core.grader.payload import decode_values
from apex_core.grader.pool import POOL
from apex_core.grader.rotation import CallRotation
from apex_core.grader.state import STATE
from apex_core.grader.process import (
    TIMING_CORES, WorkerFailure, WorkerProcess, WorkerSpec, confinement_problem, sandbox_identity,
)
from apex_core.grader.result import GradeResult, Outcome, Provenance, ShapeCheck, ShapeTiming
from apex_core.hardware.detect import DetectedDevice
from apex_core.hardware.specs import GpuSpec
from apex_core.hardware.target import spec_for_detected
from apex_core.kernels.roofline import Roofline
from apex_core.score import kernel_score, rl_reward
from apex_core.tasks.schema import DEFAULT_INPUT_SETS, Shape, Task, load_reference

GRADER_NAME = "apex"
Progress = Callable[[float, str], None]
DEFAULT_FLUSH_BYTES = 512 * 1024**2
CALL_BUFFERS = 3
"""Timed calls rotate over at least this many input buffers, each refilled with inputs drawn afresh
before every call (``rotation``)."""
STAGED_BYTES = 256 * 1024**2
"""Input bytes per timed shape beyond which fewer distinct input sets are drawn (at least 2)."""
WALL_CHECK_CALLS = 10
"""Calls per timed shape whose events are checked against the host's wall clock."""
WALL_CHECK_ATTEMPTS = 2
"""Measurements a wall-clock verdict must hold on before it counts."""
CHECKED_BUFFERS = 3
"""Call buffers whose last timed output is checked, picked at random after the timing."""
CHECKED_BYTES = 1024**3
"""Bytes of a shape's traffic (roofline) up to which all CHECKED_BUFFERS are checked; beyond it fewer."""
SMALL_CALL_BUFFERS = 8
SMALL_CALL_BYTES = 32 * 1024**2
"""Calls that move up to this many bytes (roofline: reads and writes) get SMALL_CALL_BUFFERS buffers:
more allocations averaged over, so where the memory happens to sit moves a small kernel's median
less from one grading to the next."""
SIGNAL_FACTOR = 10.0
REPRODUCE_FRACTION = 0.8
MIN_ROUNDS = 6
MAX_REPS_PER_REQUEST = 32
"""Timing alternates baseline and solution in short requests (about 20 ms of device time each for
small kernels) and at least MIN_ROUNDS of them, so drift in clocks or temperature falls on both
alike. With requests of up to 200 calls, the baseline timed against itself came out up to 1.9%
off at (256, 4096) on an H200 (2026-11-29)."""
COVER_FACTOR = 3
COVER_MARGIN_NS = 20_000
MIN_COVER_NS = 50_000
MAX_COVER_NS = 1_000_000
"""Before each timed GPU call the device spins while the host launches it. The spin lasts
COVER_FACTOR times the baseline's launch time at that shape plus COVER_MARGIN_NS, within
[MIN_COVER_NS, MAX_COVER_NS]: sized from the baseline's launch, not the solution's, so that a
solution moving work to the host before its launch has it timed rather than hidden."""


def launch_cover_ns(baseline_launch_ns: int) -> int:
    return int(min(MAX_COVER_NS, max(MIN_COVER_NS, COVER_FACTOR * baseline_launch_ns + COVER_MARGIN_NS)))


def _timing_cpu(device: str) -> int | None:
    """One core for both workers of a grading: the last one for GPU 0 (or the CPU), the one
    before it for GPU 1, and so on, so gradings on different GPUs do not share a core."""
    import os

    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
    core = cores[-1 - (index % len(cores))]
    TIMING_CORES.add(core)
    return core


class GradeOptions(BaseModel):
    device: str | None = None
    """'cuda', 'cuda:1' or 'cpu'; by default the GPU when the task needs one and torch sees one."""
    seeds_per_shape: int = Field(default=2, ge=1)
    public_seed: int = Field(default=0, ge=0)
    timeout_s: float = Field(default=180.0, gt=0)
    time_budget_s: float = Field(default=0.6, gt=0)
    """Timing budget per benchmark shape (both solutions together)."""
    target_rse: float = Field(default=0.005, gt=0)
    min_samples: int = Field(default=10, ge=3)
    inputs_per_shape: int = Field(default=8, ge=2)
    """Distinct input sets staged per timed shape: the warm-up's inputs (timed calls draw their own)."""
    timing: bool = True
    warm_pool: bool = True
    """Take workers from the warm pool (libraries already imported) and top it up afterwards."""
    hidden_shapes: bool = True
    """Check the hidden shapes too; only a timing-focused run ('benchmark') turns this off."""
    memory_bytes: int | None = Field(default=None, gt=0)
    """Resident memory one solution's processes may hold; default half the machine, at most 16 GiB."""
    bootstrap_draws: int = Field(default=1000, ge=100)
    backend: Literal["apex", "magpie"] = "apex"
    """Who times: our interleaved harness, or an installed Magpie (MAGPIE_ROOT). Correctness,
    the trace checks' verdicts, floors and ceilings stay ours either way."""
    unconfined: bool = False
    """Grade even where a solution cannot be confined (``sandbox.py``), or with the Magpie backend,
    whose processes Apex cannot confine: the solution then runs with the judge's own rights. The
    result says so (flag ``unconfined``, ``provenance.unconfined``)."""


def _machine() -> tuple[DetectedDevice, GpuSpec | None]:
    device = fingerprint.detected_device()
    return device, spec_for_detected(device)


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes: the identity of a solution in results, caches and compile caches."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _case_seed(public: int, secret: int, shape_index: int, k: int) -> int:
    digest = hashlib.sha256(f"{public}:{secret}:{shape_index}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def check_solution_file(task: Task, solution: Path) -> Path:
    """The solution path as a readable file of the right kind, or a SolutionFileError."""
    try:
        exists = solution.exists()
    except (OSError, ValueError) as exc:  # a name over the file-name limit, a NUL byte, ...
        name = str(solution)
        shown = name if len(name) <= 100 else f"{name[:60]}...{name[-30:]} ({len(name)} characters)"
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SolutionFileError(
            f"solution path {shown} cannot be opened: {why}; give the solution's path, e.g. output/{task.id}/{task.solution_filename}"
        ) from None
    if not exists:
        raise SolutionFileError(f"solution file {solution} does not exist; write output/{task.id}/{task.solution_filename}")
    if not solution.is_file():
        raise SolutionFileError(f"solution path {solution} is not a file; expected a {task.solution_filename}")
    allowed = native.COMPILED_SUFFIXES if task.language == "hip" else (".py",)
    if solution.suffix not in allowed:
        raise SolutionFileError(
            f"solution {solution} must be a {' or '.join(allowed)} file for the {task.language} task {task.id}"
        )
    try:
        solution.read_bytes()
    except OSError as exc:
        raise SolutionFileError(f"solution file {solution} is not readable: {exc.strerror}") from None
    return solution.resolve()


class _Run:
    """State of one grading: what the result model is built from."""

    def __init__(self, task: Task, solution: Path, options: GradeOptions, progress: Progress | None = None) -> None:
        self.progress = progress or (lambda fraction, message: None)
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
        self.no_custom_kernel = ""
        """Why the profiler found that the solution's own kernels did not do the work ('' if they did)."""
        self.speedup_draws: list[Any] = []
        """Bootstrap draws of each timed shape's speedup, combined into the overall interval."""
        self.corrections: dict[int, tuple[float, np.ndarray]] = {}
        """Timed shape index -> the solution's worker's shift there (its time of our baseline over
        the baseline worker's) and bootstrap draws of it; see ``calibrate``."""
        self.calibrated_worker: WorkerProcess | None = None
        self.stage_token = secrets.token_hex(4)
        self._baseline: WorkerProcess | None = None
        """The baseline's worker of this grading, its own until ``close``."""
        self._baseline_healthy = True
        self.phases: dict[str, float] = {}
        self.timing_method = ""
        self.interpreted = False
        if task.language == "triton" and self.device == "cpu":
            # No GPU: Triton kernels run in the interpreter, which checks correctness but says
            # nothing about speed.
            self.extra_env["TRITON_INTERPRET"] = "1"
            self.interpreted = True

    def close(self) -> None:
        """Give the baseline's worker back to the pool if it is healthy, else close it."""
        worker, self._baseline = self._baseline, None
        if worker is None:
            return
        if self.options.warm_pool and self._baseline_healthy and worker.alive():
            STATE.baseline_workers.give_back(self._baseline_key(), worker)
        else:
            worker.close()

    def _choose_device(self) -> str:
        from apex_core.grader.devices import grading_device  # also checked before any cache lookup

        return grading_device(self.task, self.options.device)

    def device_slot(self) -> contextlib.AbstractContextManager[str]:
        """This grading's hold on its device (``slots``): exclusive if it times there, shared if
        it only checks correctness; while queued, the progress says so."""
        times = self.options.timing and not self.interpreted
        return slots.device_slot(self.device, exclusive=times, report=lambda line: self.progress(0.0, line))

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Accumulate the wall time spent in one stage of the grading (reported in the result)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - started, 3)

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
            worker = POOL.take(spec, self.options.timeout_s)
            POOL.prepare(spec)  # replacements start now, on cores away from the timing core
            return worker
        return WorkerProcess(spec, self.options.timeout_s)

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
                raise _Failed(Outcome.infra_error, f"the baseline does not load: {reply.get('message')}")
            kind = Outcome.infra_error if reply.get("kind") == "infra_error" else Outcome.compile_error
            raise _Failed(kind, str(reply.get("message")))

    @property
    def calibrates(self) -> bool:
        """Whether the solution's worker measures its own shift first (``calibrate``): on a GPU,
        timing with our own backend, for baselines written in Python (a native baseline would
        build its extension in the solution's worker)."""
        return (
            self.device != "cpu" and self.options.timing and self.options.backend == "apex"
            and self.task.baseline_path.suffix == ".py"
        )

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

    def inputs(self, shape: Shape, seed: int) -> list[Any]:
        """The input set of ``seed``, drawn on the grading device (the workers draw the same)."""
        return seeded.draw(self.make_inputs, shape, self.task.dtype, seed, self.device, self.task.params)

    # --- correctness -----------------------------------------------------------------------------

    def check(self, worker: WorkerProcess) -> tuple[Outcome, str] | None:
        """Run every case; the first failure ends the check and is returned."""
        hidden_shapes = self.task.hidden_shapes if self.options.hidden_shapes else []
        cases = [(s, False) for s in self.task.test_shapes] + [(s, True) for s in hidden_shapes]
        seeds = self.options.seeds_per_shape
        for index, (shape, hidden) in enumerate(cases):
            for k in range(seeds):
                # Per seed: one case in Triton's interpreter can take many seconds.
                self.progress(0.1 + 0.4 * (index * seeds + k) / (len(cases) * seeds),
                              f"checking correctness, case {index + 1} of {len(cases)}" + (f", seed {k + 1} of {seeds}" if seeds > 1 else ""))
                seed = _case_seed(self.options.public_seed, self.secret_seed, index, k)
                outcome, comparison = self._check_case(worker, shape, seed, self.task.strided_args if hidden else ())
                self.checks.append(
                    ShapeCheck(
                        shape={} if hidden else shape,  # hidden shapes stay hidden from the agent
                        seed=seed,
                        hidden=hidden,
                        passed=outcome is None,
                        max_abs_error=comparison.max_abs_error,
                        max_error_index=None if hidden else comparison.max_error_index,
                        message=comparison.message,
                    )
                )
                if outcome is not None:
                    where = "hidden shape" if hidden else f"shape {shape}"
                    return outcome, f"{where}, seed {seed}: {comparison.message}"
        return None

    def _check_signal(self, expected: list[Any], shape: Shape) -> None:
        """A reference output of tolerance size would let zeros pass: that is the task's fault.

        Exact (integer) outputs are checked bit for bit and need no signal.
        """
        for position, output in enumerate(expected):
            tolerance = self.task.tolerance_for(dtype_name(output))
            if tolerance.atol == 0 and tolerance.rtol == 0:
                continue
            magnitude = _largest_finite_magnitude(output)
            if magnitude <= SIGNAL_FACTOR * max(tolerance.atol, 1e-30):
                which = f"output {position} " if len(expected) > 1 else "output "
                raise _Failed(
                    Outcome.infra_error,
                    f"the task's reference {which}at shape {shape} is at most {magnitude:.3g}, within {SIGNAL_FACTOR:g}x "
                    f"of atol={tolerance.atol:g}: the task needs inputs with more signal",
                )

    def expected(self, args: list[Any]) -> list[Any]:
        """The reference's outputs for ``args`` (drawn for it alone, on the grading device).

        They stay on that device: comparisons run there (see ``compare``).
        """
        return as_output_list(self.reference(*args))

    def _check_case(
        self, worker: WorkerProcess, shape: Shape, seed: int, strided: tuple[int, ...] = ()
    ) -> tuple[Outcome | None, Comparison]:
        """One call at ``shape`` on the inputs of ``seed``; ``strided``: arguments the worker passes
        as row-strided views (same values, so the reference is computed on contiguous ones)."""
        library = self.task.array_library
        digest_key = secrets.randbits(62)
        # The worker calls while the judge computes the reference.
        pending = worker.submit(protocol.Call(shape=shape, seed=seed, strided=tuple(strided), digest_key=digest_key))
        args = self.inputs(shape, seed)
        # Before the reference runs: the inputs as drawn, whatever the reference does with them.
        digests = digest.input_digests(args, digest_key, skip=self.task.output_args)
        expected = self.expected(args)
        reply, payload = worker.collect(pending, _payload_limit(expected))
        self._check_signal(expected, shape)
        if not reply.get("ok"):
            return Outcome.runtime_error, Comparison(passed=False, message=str(reply.get("message", "the call raised")))
        if reply.get("output_type") != "exact":
            wanted = "torch.Tensor" if library == "torch" else "numpy.ndarray"
            message = f"returned {reply.get('output_type')}, expected exactly {wanted} or a tuple of them"
            return Outcome.wrong_answer, Comparison(passed=False, message=message)
        try:
            outputs = decode_values(payload, library)
        except Exception:  # whatever the bytes were, they were not plain arrays
            return Outcome.wrong_answer, Comparison(passed=False, message="the output could not be decoded as plain arrays")
        devices = {str(d).split(":")[0] for d in reply.get("output_devices", [])}
        if library == "torch" and devices != {self.device.split(":")[0]}:
            message = f"output on {', '.join(sorted(devices)) or 'no device'}, expected on {self.device}"
            return Outcome.wrong_answer, Comparison(passed=False, message=message)
        comparison = compare_all(outputs, expected, self.task)
        if not comparison.passed:
            return Outcome.wrong_answer, comparison
        if reply.get("input_digests") != digests:
            return Outcome.wrong_answer, comparison.model_copy(update={"passed": False, "message": "the call modified its inputs"})
        return None, comparison

    # --- timing ------------------------------------------------------------------------------------

    def timing_plan(self, shape: Shape, index: int) -> tuple[list[int], int, int]:
        """(seeds, call buffers, flush bytes) of timed shape number ``index``."""
        seeds = [_case_seed(self.options.public_seed, self.secret_seed, 1000 + index, k) for k in range(self.input_sets(shape))]
        buffers = SMALL_CALL_BUFFERS if self.call_bytes(shape) <= SMALL_CALL_BYTES else CALL_BUFFERS
        _, spec = _machine() if self.device != "cpu" else (None, None)
        flush = (spec.cache_flush_bytes if spec else DEFAULT_FLUSH_BYTES) if self.device != "cpu" else 0
        return seeds, buffers, flush

    def _stage(
        self, workers: dict[str, WorkerProcess], shape: Shape, seeds: list[int], buffers: int, kept: str | None = None
    ) -> dict[str, int]:
        """Stage the inputs (or take up the stage the workers kept as ``kept``) and warm up in each
        worker; their host launch times."""
        launch_ns: dict[str, int] = {}
        for name, worker in workers.items():
            if kept is not None:
                request: protocol.Request = protocol.Select(name=kept)
            else:
                request = protocol.Stage(shape=shape, seeds=tuple(seeds), buffers=buffers)
            reply, _ = worker.request(request)
            self._require_ok(reply, name)
            reply, _ = worker.request(protocol.Warmup(min_calls=10, min_seconds=0.025))
            self._require_ok(reply, name)
            launch_ns[name] = int(reply.get("launch_ns", 0))
        return launch_ns

    def _time_rounds(
        self, workers: dict[str, WorkerProcess], flush: int, cover_ns: int, rotation: CallRotation | None = None,
        give_up_above_ns: float | None = None,
    ) -> tuple[dict[str, list[int]], dict[str, int]] | None:
        """Samples of the two workers, timed in alternating rounds until both medians are stable
        or the budget is spent; with the Python threads each had. ``rotation`` follows the
        solution's call buffers. None if, after the first round, the baseline's median is above
        ``give_up_above_ns``."""
        on_gpu = self.device != "cpu"
        samples: dict[str, list[int]] = {name: [] for name in workers}
        threads: dict[str, int] = {}
        reps = 5
        deadline = time.monotonic() + self.options.time_budget_s
        round_index = 0
        while True:
            order = list(workers.items())
            if round_index % 2:
                order.reverse()
            for name, worker in order:
                request_key = secrets.randbits(62)
                reply, _ = worker.request(protocol.Time(reps=reps, request_key=request_key, flush_bytes=flush, cover_ns=cover_ns))
                self._require_ok(reply, name)
                if name == "solution" and rotation is not None:
                    rotation.timed_request(reps, request_key)
                samples[name].extend(int(s) for s in reply["samples_ns"])
                threads[name] = int(reply.get("python_threads", 0))
            round_index += 1
            if round_index == 1 and give_up_above_ns is not None and stats.median(samples["baseline"]) > give_up_above_ns:
                return None
            enough = round_index >= MIN_ROUNDS and all(len(v) >= self.options.min_samples for v in samples.values())
            stable = all(
                stats.relative_standard_error_of_median(v, robust=on_gpu) < self.options.target_rse for v in samples.values()
            )
            if (enough and stable) or time.monotonic() >= deadline:
                return samples, threads
            # Grow the chunk so that per-request overhead stays small for fast kernels.
            slowest = max(stats.median(v) for v in samples.values())
            reps = int(min(MAX_REPS_PER_REQUEST, max(5, 0.05e9 / max(slowest, 1.0))))

    def calibrate(self, candidate: WorkerProcess, shorter_than_ns: float = stats.SHORT_CALL_NS) -> None:
        """Measure, before the solution is imported, how the candidate's process shifts short calls.

        Two GPU processes time one 4-8 us kernel a few percent apart, and none of the causes tried
        (the flush, where buffers, outputs or code sit, batching, the SM clock) set the shift
        (docs/benchmarks.md). The shift is largely common to the kernels a process runs at one
        shape: on an H200 the baseline and a faster kernel timed in the same processes had medians
        whose ratio varied 2.5-4x less between processes than either median. So the candidate's
        fresh worker first loads our baseline and times it against the baseline's worker at each
        short timed shape. The ratio of the two, measured while no solution code had yet run in
        that process, corrects the solution's speedup at that shape later (``time_shape``); the
        shift moves a little by then, which the interval allows for
        (``stats.CALIBRATED_RESIDUAL_SPREAD``). Shapes whose baseline call takes ``shorter_than_ns``
        or more are skipped (known from an earlier grading in this process, else after one
        round): there processes differ by a few tenths of a percent, which the interval takes.
        """
        control_cache = candidate.scratch / "control-compile"
        trusted_cache = self.baseline_compile_cache()
        if trusted_cache.is_dir():
            # A copy of our baseline's compiled kernels, so the control compiles nothing; made
            # fresh for this worker, so nothing the solution later writes there matters.
            shutil.copytree(trusted_cache, control_cache, dirs_exist_ok=True)
        self.load_into(candidate, self.task.baseline_path, control_cache)
        self.calibrated_worker = candidate
        with self.baseline_worker() as baseline:
            workers = {"baseline": baseline, "solution": candidate}
            for index, shape in enumerate(self.task.timed_shapes):
                known = STATE.baseline_medians.get(self.baseline_median_key(shape))
                if known is not None and known >= shorter_than_ns:
                    continue
                seeds, buffers, flush = self.timing_plan(shape, index)
                launch_ns = self._stage(workers, shape, seeds, buffers)
                timed = self._time_rounds(workers, flush, launch_cover_ns(launch_ns["baseline"]), give_up_above_ns=shorter_than_ns)
                if timed is None:
                    continue
                for name, worker in workers.items():
                    reply, _ = worker.request(protocol.Keep(name=self.kept_stage(index)))
                    self._require_ok(reply, name)
                samples, _ = timed
                factor = stats.median(samples["solution"]) / max(stats.median(samples["baseline"]), 1e-9)
                draws = stats.bootstrap_speedup_draws(
                    samples["solution"], samples["baseline"], self.options.bootstrap_draws, seed=10_000 + index
                )
                self.corrections[index] = (factor, draws)

    def kept_stage(self, index: int) -> str:
        """The name under which both workers keep the stage of timed shape ``index`` from the
        calibration to the timing (unique to this grading)."""
        return f"{self.stage_token}-{index}"

    def baseline_median_key(self, shape: Shape) -> tuple[str, str, str, tuple[tuple[str, int], ...]]:
        return (self.task.id, self.task.content_hash(), self.device, tuple(sorted(shape.items())))

    def baseline_compile_cache(self) -> Path:
        """Where our baseline's kernels are compiled: a cache only the judge's user can write."""
        return default_cache_dir() / "baseline-compile" / file_hash(self.task.baseline_path)[:16]

    def time_shape(
        self, baseline: WorkerProcess, candidate: WorkerProcess, shape: Shape, index: int, spec: GpuSpec | None
    ) -> ShapeTiming:
        on_gpu = self.device != "cpu"
        # Each worker draws the input sets on the device from these seeds, as the judge does for
        # the references: nothing large crosses a pipe.
        seeds, buffers, flush = self.timing_plan(shape, index)
        workers = {"baseline": baseline, "solution": candidate}
        # A calibrated shape is timed on the stages its calibration used, in both workers: a
        # process's shift at a short call can change from one staging to the next.
        calibrated = candidate is self.calibrated_worker and index in self.corrections
        with self.phase("timing.stage"):
            launch_ns = self._stage(workers, shape, seeds, buffers, kept=self.kept_stage(index) if calibrated else None)
        cover_ns = launch_cover_ns(launch_ns["baseline"]) if on_gpu else 0
        rotation = CallRotation(len(seeds), buffers)
        """The judge's own account of which input set each of the solution's buffers held."""
        timed = self._time_rounds(workers, flush, cover_ns, rotation)
        assert timed is not None
        samples, threads = timed
        with self.phase("timing.outputs"):
            self._check_timed_outputs(candidate, shape, rotation)
        if on_gpu:
            with self.phase("timing.wall_clock"):
                self._check_wall_clock(baseline, candidate, shape, cover_ns)
        if index == 0 and on_gpu:
            with self.phase("trace"):
                self._check_trace(baseline, candidate)
        if threads.get("solution", 0) > threads.get("baseline", 0):
            self.flags.append(f"spawned_threads: {threads['solution'] - threads['baseline']} extra Python threads")
        b_med, s_med = stats.median(samples["baseline"]), stats.median(samples["solution"])
        STATE.baseline_medians[self.baseline_median_key(shape)] = b_med
        draws = stats.bootstrap_speedup_draws(samples["baseline"], samples["solution"], self.options.bootstrap_draws, seed=index)
        # The candidate's own shift, if it was measured in this very worker (not in the fresh one
        # of a hardened re-measurement); otherwise the interval takes the spread between processes.
        factor, shift_draws = self.corrections.get(index, (None, None)) if candidate is self.calibrated_worker else (None, None)
        if shift_draws is not None:
            draws = stats.with_process_shift(draws, shift_draws)
        elif on_gpu:
            draws = stats.with_between_process_spread(draws, b_med)
        self.speedup_draws.append(draws)
        floor_ns = self.floor_ns(shape, spec)
        return ShapeTiming(
            shape=shape,
            baseline_median_ns=b_med,
            solution_median_ns=s_med,
            speedup=b_med / max(s_med, 1e-9) * (factor or 1.0),
            speedup_ci95=stats.interval(draws),
            baseline_samples_ns=samples["baseline"],
            solution_samples_ns=samples["solution"],
            roofline_floor_ns=floor_ns,
            launch_cover_ns=cover_ns or None,
            solution_launch_ns=launch_ns["solution"] if on_gpu else None,
            process_correction=factor,
        )

    @staticmethod
    def _require_ok(reply: dict[str, Any], name: str) -> None:
        if not reply.get("ok"):
            outcome = Outcome.runtime_error if name == "solution" else Outcome.infra_error
            prefix = "" if name == "solution" else "the baseline failed: "
            raise _Failed(outcome, prefix + str(reply.get("message")))

    def _check_timed_outputs(self, candidate: WorkerProcess, shape: Shape, rotation: CallRotation) -> None:
        """The last output of call buffers picked now, at random, must match the reference of the
        values they held (drawn from each call's own seed): a solution that returns stale or
        cached outputs cannot know which.

        Which values a buffer held comes from the judge's own copy of the rotation, never from the
        reply: a process that rewrote the worker's bookkeeping cannot steer the check to the one
        input set it answers right, or leave buffers out.
        """
        library = self.task.array_library
        timed = sorted(rotation.last_timed)
        # Outputs cross a pipe: at a gigabyte per output set (an 8192 x 34816 GEMM), one buffer.
        checked = min(len(timed), CHECKED_BUFFERS, max(1, CHECKED_BYTES // max(self.call_bytes(shape), 1)))
        picked = sorted(secrets.SystemRandom().sample(timed, checked))
        held = [rotation.last_timed[slot] for slot in picked]
        references: dict[int, list[Any]] = {held[0]: self.expected(self.inputs(shape, held[0]))}
        per_call = len(references[held[0]])
        # The outputs of ``checked`` calls, each the size of the reference's outputs at this shape.
        limit = checked * (_payload_limit(references[held[0]]) - PAYLOAD_SLACK_BYTES) + PAYLOAD_SLACK_BYTES
        reply, payload = candidate.request(protocol.TimedOutputs(slots=tuple(picked)), max_payload=limit)
        if reply.get("output_type") != "exact":
            raise _Failed(Outcome.wrong_answer, f"a timed call at shape {shape} returned {reply.get('output_type')}")
        try:
            values = decode_values(payload, library)
        except Exception:  # whatever the bytes were, they were not plain arrays
            raise _Failed(Outcome.wrong_answer, "the outputs of the timed calls could not be decoded") from None
        if len(values) != checked * per_call:
            raise _Failed(
                Outcome.wrong_answer,
                f"asked for the outputs of {checked} timed calls at shape {shape} ({per_call} each), got {len(values)} arrays",
            )
        for position, item in enumerate(held):
            outputs = values[position * per_call : (position + 1) * per_call]
            if item not in references:
                references[item] = self.expected(self.inputs(shape, item))
            comparison = compare_all(outputs, references[item], self.task)
            if not comparison.passed:
                raise _Failed(
                    Outcome.wrong_answer,
                    f"the output of a timed call at shape {shape} is wrong (stale or cached?): {comparison.message}",
                )

    def _check_wall_clock(self, baseline: WorkerProcess, candidate: WorkerProcess, shape: Shape, cover_ns: int) -> None:
        """The host's wall clock must not see device work that the timer's events missed.

        The baseline is measured the same way just before, as the control; a verdict must hold on
        a second measurement too, so that a moment of host or driver contention blames no one.
        """
        reason = ""
        for _ in range(WALL_CHECK_ATTEMPTS):
            request = protocol.WallCheck(request_key=secrets.randbits(62), calls=WALL_CHECK_CALLS, cover_ns=cover_ns)
            control, _ = baseline.request(request)
            self._require_ok(control, "baseline")
            reply, _ = candidate.request(request)
            self._require_ok(reply, "solution")
            reason = wall_clock.unseen_work_reason(
                [int(v) for v in reply.get("event_ns", [])],
                [int(v) for v in reply.get("after_end_ns", [])],
                [int(v) for v in control.get("after_end_ns", [])],
            )
            if not reason:
                return
        self.flags.append(f"unseen_device_work: {reason}")
        raise _Failed(Outcome.tampering, f"at shape {shape}: {reason}")

    def _check_trace(self, baseline: WorkerProcess, candidate: WorkerProcess) -> None:
        """Profile one call: the work must stay on the timed stream and be the solution's own.

        The baseline's trace (which stream the timer watches) is profiled once per task and device
        in this process and then reused.
        """
        key = (self.task.id, self.task.content_hash(), self.device)
        if key not in STATE.baseline_traces:
            reply, _ = baseline.request(protocol.Profile(request_key=secrets.randbits(62)))
            self._require_ok(reply, "baseline")
            STATE.baseline_traces[key] = reply
        reply, _ = candidate.request(protocol.Profile(request_key=secrets.randbits(62)))
        self._require_ok(reply, "solution")
        if not self.task.allow_side_streams:
            reason = trace_checks.side_stream_reason(STATE.baseline_traces[key], reply)
            if reason:
                raise _Failed(Outcome.tampering, reason)
        if self.task.language in ("triton", "hip"):
            self.no_custom_kernel = trace_checks.own_work_reason(reply)
            if self.no_custom_kernel:
                self.flags.append(f"no_custom_kernel: {self.no_custom_kernel}")

    def time_all(self, candidate: WorkerProcess) -> list[ShapeTiming]:
        _, spec = _machine() if self.device != "cpu" else (None, None)
        with self.baseline_worker() as baseline:
            timings = []
            shapes = self.task.timed_shapes
            for index, shape in enumerate(shapes):
                self.progress(0.5 + 0.45 * index / len(shapes), f"timing shape {shape} ({index + 1} of {len(shapes)})")
                timings.append(self.time_shape(baseline, candidate, shape, index, spec))
            return timings

    def time_with_magpie(self) -> None:
        """Let an installed Magpie time baseline and solution; floors and ceilings stay ours."""
        from apex_core.grader import magpie

        scratch = Path(tempfile.mkdtemp(prefix="apex-magpie-"))
        try:
            timing = magpie.run_magpie_timing(
                self.task, self.task.baseline_path, self.solution, self.task.timed_shapes, self.options.timeout_s, scratch,
                seed=secrets.randbits(31),
            )
        except magpie.MagpieError as error:
            raise _Failed(Outcome(error.outcome), f"Magpie: {error}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _, spec = _machine()
        self.timing_method = f"Magpie ({timing.timing_method})"
        for index, measured in enumerate(timing.shapes):
            baseline = [int(round(v)) for v in measured.baseline_samples_ns] or [int(measured.baseline_median_ns)]
            solution = [int(round(v)) for v in measured.solution_samples_ns] or [int(measured.solution_median_ns)]
            draws = stats.bootstrap_speedup_draws(baseline, solution, self.options.bootstrap_draws, seed=index)
            if self.device != "cpu":
                draws = stats.with_between_process_spread(draws, measured.baseline_median_ns)
            self.speedup_draws.append(draws)
            self.timings.append(
                ShapeTiming(
                    shape=measured.shape,
                    baseline_median_ns=measured.baseline_median_ns,
                    solution_median_ns=measured.solution_median_ns,
                    speedup=measured.speedup,
                    speedup_ci95=stats.interval(draws),
                    baseline_samples_ns=baseline,
                    solution_samples_ns=solution,
                    roofline_floor_ns=self.floor_ns(measured.shape, spec),
                )
            )
        overall = stats.geometric_mean([t.speedup for t in self.timings])
        if overall > self.task.speedup_ceiling:
            # Magpie has no hardened mode of ours; an implausible speedup earns nothing from it.
            raise _Failed(
                Outcome.tampering,
                f"Magpie measured {overall:.2f}x, above the task's {self.task.speedup_ceiling:g}x ceiling; "
                "grade with the apex backend to have it re-measured",
            )

    def floor_ns(self, shape: Shape, spec: GpuSpec | None) -> float | None:
        if spec is None or self.device == "cpu":
            return None
        model: Roofline = self.roofline(shape, self.task.dtype, self.task.params)
        return model.floor_seconds(spec, self.task.dtype) * 1e9

    def time_with_ceiling(self, candidate: WorkerProcess) -> None:
        """Time; a speedup above the task's ceiling is measured again, hardened, before any credit.

        The lower of the two measurements is credited. One that does not reproduce is flagged, not
        judged: a solution that games the first measurement gains nothing from it, while noise
        (gradings under load once turned an honest 1472x into 264x) never makes an honest
        solution a cheat.
        """
        self.timings = self.time_all(candidate)
        first = stats.geometric_mean([t.speedup for t in self.timings])
        if first <= self.task.speedup_ceiling:
            return
        self.flags.append(f"above_ceiling: {first:.2f}x exceeds the task's {self.task.speedup_ceiling:g}x; re-measured")
        first_timings, first_draws = self.timings, self.speedup_draws
        self.secret_seed = secrets.randbits(32)
        self.speedup_draws = []
        hardened = self.options.model_copy(
            update={"inputs_per_shape": 4 * self.options.inputs_per_shape, "time_budget_s": 2 * self.options.time_budget_s}
        )
        saved, self.options = self.options, hardened
        try:
            with self.worker(self.solution, self.candidate_cache()) as fresh:
                self.timings = self.time_all(fresh)
        finally:
            self.options = saved
        second = stats.geometric_mean([t.speedup for t in self.timings])
        if second > first:
            self.timings, self.speedup_draws = first_timings, first_draws
        if min(first, second) < REPRODUCE_FRACTION * max(first, second):
            self.flags.append(
                f"irreproducible_speedup: {first:.2f}x, then {second:.2f}x in a hardened re-measurement; "
                f"the lower is credited"
            )


class _Failed(Exception):
    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


PAYLOAD_SLACK_BYTES = 1 << 20
"""Room for a payload's header and alignment beyond its arrays' bytes."""


def _payload_limit(expected: list[Any]) -> int:
    """The most bytes a worker's reply may carry when the outputs should look like ``expected``."""
    return sum(int(output.nbytes) for output in expected) + PAYLOAD_SLACK_BYTES


def _largest_finite_magnitude(value: Any) -> float:
    if hasattr(value, "detach"):
        import torch

        finite = value.detach().to(torch.float64)
        finite = finite[torch.isfinite(finite)]
        return float(finite.abs().max()) if finite.numel() else 0.0
    values = as_float64(value)
    return float(np.max(np.abs(values[np.isfinite(values)]), initial=0.0))


def _provenance(
    task: Task,
    solution: Path | None,
    device_name: str,
    public_seed: int,
    clocks_before: Clocks | None = None,
    timing_method: str = "",
    clocks_after: Clocks | None = None,
    unconfined: bool = False,
) -> Provenance:
    on_gpu = device_name != "cpu"
    env = fingerprint.environment(on_gpu)
    return Provenance(
        task_hash=task.content_hash(),
        solution_hash=file_hash(solution) if solution is not None and solution.is_file() else "",
        grader=GRADER_NAME,
        grader_version=apex_core.__version__,
        environment=env,
        environment_key=env.key(),
        clocks_before=clocks_before,
        clocks_after=clocks_after,
        timing_method=timing_method
        or (
            "cuda events per call after a device spin sized from the baseline's launch time, cache flush of 2x the "
            "last-level cache, inputs drawn afresh for every call, interleaved A/B, adaptive; calls under 20 us corrected by "
            "the solution worker's own shift, measured on the baseline before the solution was imported; other "
            "speedup intervals widened by the measured spread between worker processes"
            if on_gpu
            else "perf_counter_ns per call, inputs drawn afresh for every call, interleaved A/B, adaptive"
        ),
        public_seed=public_seed,
        unconfined=unconfined,
    )


def result_without_solution(task: Task, solution: Path, reason: str) -> GradeResult:
    """The result for an agent that left no usable solution file: nothing compiled, no points."""
    return GradeResult(
        task_id=task.id,
        solution_path=str(solution),
        outcome=Outcome.compile_error,
        reason=reason,
        compiled=False,
        correct=False,
        score=kernel_score(False, False, None),
        rl_reward=rl_reward(Outcome.compile_error.value, False, None),
        provenance=_provenance(task, None, "cpu", 0),
        elapsed_s=0.0,
    )


def _require_magpie(task: Task) -> None:
    """A Magpie grading that cannot happen is the user's mistake: say so before anything runs."""
    from apex_core.grader import magpie

    magpie.require_magpie_root()
    reason = magpie.magpie_supports(task)
    if reason:
        raise ApexUserError(f"--backend magpie cannot grade {task.id}: {reason}; use --backend apex")


def _require_confinement(options: GradeOptions) -> None:
    """Refuse, in one line and before anything runs, to run a solution that cannot be confined,
    unless the user asked for it (``unconfined``)."""
    if options.unconfined:
        return
    if options.backend == "magpie" and options.timing:
        raise ApexUserError(
            "--backend magpie runs the solution in Magpie's own processes, which Apex cannot confine; "
            "pass --unconfined to time with Magpie anyway (the result records it)"
        )
    problem = confinement_problem()
    if problem:
        raise ApexUserError(
            f"refusing to grade: solutions cannot be confined on this machine ({problem}); "
            "pass --unconfined to run them with your own rights (the result records it)"
        )


def grade(task: Task, solution: Path, options: GradeOptions | None = None, progress: Progress | None = None) -> GradeResult:
    """Grade ``solution`` for ``task``; user mistakes (a missing file) raise SolutionFileError.

    ``progress(fraction, message)`` is called as the grading moves through its stages.
    """
    options = options or GradeOptions()
    solution = check_solution_file(task, Path(solution))
    if options.backend == "magpie" and options.timing:
        _require_magpie(task)
    _require_confinement(options)
    run = _Run(task, solution, options, progress)
    if options.unconfined:
        run.flags.append("unconfined: the solution ran with the judge's own rights, outside the sandbox (--unconfined)")
    run.progress(0.0, "starting a worker and loading the solution")
    findings = prescan.scan_source(solution.read_text(encoding="utf-8", errors="replace"))
    run.flags.extend(finding.flag() for finding in findings)
    hard = [f for f in findings if f.kind in prescan.HARD_KINDS]
    compiled = correct = False
    outcome, reason = Outcome.ok, ""
    with run.phase("integrity"):
        snapshot = integrity.take_snapshot()
    # The clocks are read by a vendor tool (tens of milliseconds): alongside the work, not before it.
    clocks_before = STATE.background.submit(fingerprint.read_clocks, run.device != "cpu")
    slot = contextlib.ExitStack()
    """The device's slot, held from before the first worker starts until the last one is done."""
    try:
        if STATE.dirty_environment:
            raise _Failed(
                Outcome.infra_error,
                f"an earlier solution changed installed libraries ({STATE.dirty_environment[0]}); reinstall them "
                "(bash setup.sh) and start a new grading process",
            )
        with run.phase("queue"):
            slot.enter_context(run.device_slot())
        with run.phase("load"):
            candidate = run.start_worker()
        with candidate:
            if run.calibrates:
                with run.phase("calibration"):
                    try:
                        run.calibrate(candidate)
                    except (_Failed, WorkerFailure) as failure:  # only our own code has run there yet
                        raise _Failed(Outcome.infra_error, f"calibrating the solution's worker: {failure}") from None
            run.progress(0.05, "loading the solution (importing and compiling it)")
            with run.phase("load"):
                run.load_into(candidate, solution, run.candidate_cache())
            compiled = True
            with run.phase("correctness"):
                failure = run.check(candidate)
            if failure:
                raise _Failed(*failure)
            correct = True
            if options.timing and not run.interpreted:
                with run.phase("timing"):
                    if options.backend == "magpie":
                        run.time_with_magpie()
                    else:
                        run.time_with_ceiling(candidate)
            elif run.interpreted:
                run.flags.append("not_timed: Triton ran in the CPU interpreter, whose speed means nothing")
    except _Failed as failed:
        outcome, reason = failed.outcome, failed.reason
    except WorkerFailure as failure:
        kinds = {"timeout": Outcome.timeout, "tampering": Outcome.tampering, "infra_error": Outcome.infra_error}
        outcome, reason = kinds.get(failure.kind, Outcome.crash), str(failure)
    finally:
        run.close()
        slot.close()

    if hard and outcome in (Outcome.ok, Outcome.wrong_answer, Outcome.runtime_error):
        outcome, reason = Outcome.tampering, f"line {hard[0].line}: {hard[0].detail}"
    clocks_after = STATE.background.submit(fingerprint.read_clocks, run.device != "cpu")
    run.progress(0.97, "checking that Apex's files and the libraries are as they were")
    with run.phase("integrity"):
        changes = integrity.compare(snapshot)
    if changes:
        integrity.restore(snapshot, changes)
        if changes.library_files:
            STATE.dirty_environment.append(str(changes.library_files[0]))
        outcome, reason = Outcome.tampering, changes.describe()
        run.flags.append(f"tampering: {changes.describe()}")

    measured = credited = None
    interval_all = None
    if run.timings and outcome in (Outcome.ok, Outcome.tampering):
        measured = stats.geometric_mean([t.speedup for t in run.timings])
        combined = np.exp(np.mean([np.log(d) for d in run.speedup_draws], axis=0))
        interval_all = stats.interval(combined)
        credited = 1.0 if interval_all[0] <= 1.0 <= interval_all[1] else measured
        below = [t for t in run.timings if t.roofline_floor_ns and t.solution_median_ns < t.roofline_floor_ns]
        if below:
            run.flags.append(
                f"below_roofline_floor: {below[0].solution_median_ns:.0f} ns measured, floor {below[0].roofline_floor_ns:.0f} ns"
            )
            outcome, reason = Outcome.tampering, "measured faster than the hardware allows"
        if outcome is Outcome.tampering:
            credited = min(credited, 1.0)
        if run.no_custom_kernel:
            credited = None  # a correct answer, but not one made by the solution's own kernel
    if outcome is Outcome.infra_error:
        compiled = correct = False  # never blame the candidate for our failure; no score either way

    score = kernel_score(compiled, correct, credited if correct else None, tampering=outcome is Outcome.tampering)
    return GradeResult(
        task_id=task.id,
        solution_path=str(solution),
        outcome=outcome,
        reason=reason,
        compiled=compiled,
        correct=correct,
        speedup=credited,
        measured_speedup=measured,
        speedup_ci95=interval_all,
        baseline_median_ns=stats.geometric_mean([t.baseline_median_ns for t in run.timings]) if run.timings else None,
        solution_median_ns=stats.geometric_mean([t.solution_median_ns for t in run.timings]) if run.timings else None,
        checks=run.checks,
        timings=run.timings,
        flags=run.flags,
        score=score,
        rl_reward=rl_reward(outcome.value, correct, credited if correct else None, own_work=not run.no_custom_kernel),
        provenance=_provenance(
            task, solution, run.device, options.public_seed, clocks_before.result(), run.timing_method, clocks_after.result(),
            options.unconfined,
        ),
        elapsed_s=round(time.monotonic() - run.started, 3),
        phases_s=run.phases,
    )
