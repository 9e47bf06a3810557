"""The child process that runs one solution (candidate or baseline) for the judge.

It imports the solution, then serves the judge's requests over the pipe pair it was given: call the
entry point on inputs, stage inputs for timing, warm up, take timed samples. It never sees the
reference or the verdict; it only reports what happened. Run as
``python -m apex_core.grader.isolation.worker READ_FD WRITE_FD [SHARED_FD]``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from apex_core.grader.isolation import native, protocol, wire
from apex_core.grader.isolation.device_memory import release_cached_device_memory
from apex_core.grader.isolation.digest import input_digests  # bound before any solution is imported
from apex_core.grader.isolation.payload import Payload, encode_values
from apex_core.grader.isolation.rotation import CallRotation, call_seed

_perf_counter_ns = time.perf_counter_ns  # bound before any candidate code runs


def describe_exception(exc: BaseException, solution_path: str) -> str:
    """One readable line or two: the exception and the innermost frame in the solution file."""
    if isinstance(exc, SyntaxError):
        where = f"{Path(exc.filename or solution_path).name}, line {exc.lineno}"
        text = (exc.text or "").strip()
        return f"SyntaxError at {where}: {exc.msg}" + (f": {text}" if text else "")
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if f.filename == solution_path]
    location = ""
    if inside:
        frame = inside[-1]
        location = f" at {Path(frame.filename).name}, line {frame.lineno}" + (f": {frame.line}" if frame.line else "")
    message = f"{type(exc).__name__}: {exc}".strip()
    if len(message) > 2000:
        message = message[:2000] + " ..."
    return message + location


def _fresh_copy(value: Any) -> Any:
    """A copy in newly allocated memory (so pointers differ from the pool's)."""
    if hasattr(value, "clone"):
        return value.clone()
    if hasattr(value, "copy"):
        return value.copy()
    return value


def _copy_into(target: Any, source: Any) -> None:
    if hasattr(target, "copy_"):
        target.copy_(source)
    elif hasattr(target, "shape") and hasattr(target, "dtype"):
        import numpy as np

        np.copyto(target, source)


KEPT_STAGES = 8
"""Named stages a worker keeps; a long-lived baseline worker drops the oldest beyond this."""
CALIBRATION_CYCLES = 200_000
"""Cycles the spin runs while its rate is measured (about 0.1 ms at 2 GHz)."""


class _DeviceTimers:
    """The timing primitives, bound before any solution code is imported.

    A solution that later replaces ``torch.cuda.Event.elapsed_time`` or ``torch.cuda.synchronize``
    changes the module attributes, not these references.
    """

    def __init__(self, torch: ModuleType, device: str) -> None:
        event_type = torch.cuda.Event
        self.record = event_type.record
        self.elapsed = event_type.elapsed_time
        self.synchronize = torch.cuda.synchronize
        self._sleep = getattr(torch.cuda, "_sleep", None)
        self.start = event_type(enable_timing=True)
        self.end = event_type(enable_timing=True)
        self.event_synchronize = event_type.synchronize
        self._zeros = torch.zeros
        self._int32 = torch.int32
        self._device = device
        self._zero = torch.Tensor.zero_

        # Rate of the device spin's clock, measured by ``calibrate`` (the spin counts cycles of a
        # clock whose rate differs between vendors and with the clock state).
        self.spin_cycles_per_ns = 2.0

    def calibrate(self) -> None:
        """Time the spin itself with events (median of 3); called when the device is warm."""
        if self._sleep is None:
            return
        rates = []
        for _ in range(3):
            self.record(self.start)
            self._sleep(CALIBRATION_CYCLES)
            self.record(self.end)
            self.synchronize()
            rates.append(CALIBRATION_CYCLES / max(self.elapsed(self.start, self.end) * 1e6, 1.0))
        self.spin_cycles_per_ns = sorted(rates)[1]

    def cover_launch(self, cover_ns: int) -> None:
        """Keep the device busy for ``cover_ns`` while the host launches the call, so that the
        events time the kernels, not the Python launch overhead."""
        if self._sleep is not None and cover_ns > 0:
            self._sleep(max(1, int(cover_ns * self.spin_cycles_per_ns)))

    def new_flush_buffer(self, flush_bytes: int) -> Any:
        return self._zeros(flush_bytes // 4, dtype=self._int32, device=self._device)

    def flush(self, buffer: Any) -> None:
        """Evict the last-level cache by writing ``buffer`` (at least twice its size).

        A write leaves the cache full of dirty lines that the timed call partly pays to write
        back, as GPU MODE's and Triton's do_bench clears do. Flushing by reading instead moved us
        away from the GPU-MODE-style figure and made small calls no more repeatable (docs/grader.md, 'Measured reasons').
        """
        self._zero(buffer)


def triton_kernel_names(module: ModuleType) -> list[str]:
    """Names of the Triton kernels a solution module defines (through autotune/heuristics wrappers)."""
    names = []
    for value in vars(module).values():
        kind = type(value).__name__
        if kind not in ("JITFunction", "Autotuner", "Heuristics", "InterpretedFunction"):
            continue
        inner, depth = value, 0
        while hasattr(inner, "fn") and depth < 8:
            inner, depth = inner.fn, depth + 1
        name = getattr(inner, "__name__", None)
        if isinstance(name, str):
            names.append(name)
    return sorted(set(names))


def _warm_up_profiler(torch: ModuleType) -> None:
    """Profile one trivial kernel at start-up.

    The profiler's first use initializes the vendor tracing library (CUPTI, roctracer), which takes
    seconds and leaves the launch path slightly different afterwards. Doing it here, in every
    worker alike, keeps that cost out of the grading and puts baseline and solution in the same state.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.ones(8, device="cuda").sum()
        torch.cuda.synchronize()


class Worker:
    def __init__(self, library: str, device: str) -> None:
        self.solution_path = ""
        self.entry_point = ""
        self.output_args: list[int] = []
        self.library = library
        self.device = device
        self.function: Callable[..., Any] | None = None
        self.own_kernels: list[str] = []
        self.cpu: int | None = None
        # The cores the worker started on (those no timing uses): where it compiles.
        self.free_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
        self.pool: list[list[Any]] = []
        self.buffers: list[list[Any]] = []
        self.rotation = CallRotation(1, 1)
        # Call buffer -> what its last timed call returned, and its arguments.
        self.timed_outputs: dict[int, tuple[Any, list[Any]]] = {}
        # The shape of the current stage: timed calls draw fresh inputs of it.
        self.stage_shape: dict[str, int] = {}
        # Stages kept by name (shape, input sets, call buffers), oldest first, at most KEPT_STAGES.
        self.kept_stages: dict[str, tuple[dict[str, int], list[list[Any]], list[list[Any]]]] = {}
        # The task's input generator (reference, dtype, params): inputs are drawn here, on the
        # device, from the seeds the judge sends, instead of travelling through the pipe.
        self.inputs: dict[str, Any] = {}
        self.make_inputs: Callable[..., Any] | None = None
        self.flush_buffer: Any = None
        self.torch: ModuleType | None = None
        self.timers: _DeviceTimers | None = None
        if library == "torch":
            import torch

            self.torch = torch
            if device.startswith("cuda"):
                # Events, synchronization and default allocations all follow the current device.
                index = torch.device(device).index
                if index is not None:  # plain 'cuda' means the current device, which set_device refuses
                    torch.cuda.set_device(index)
                self.timers = _DeviceTimers(torch, device)
                torch.empty(1, device=device)  # create the context now, not inside the first call
                _warm_up_profiler(torch)
            try:
                import triton  # noqa: F401  (imported ahead so a pooled worker pays for it before grading)
            except ImportError:
                pass
            else:
                if os.environ.get("TRITON_INTERPRET") == "1":
                    from apex_core.kernels import interpreter_fixes

                    interpreter_fixes.apply()

    # --- helpers ----------------------------------------------------------------------------

    def _synchronize(self) -> None:
        if self.timers is not None:
            self.timers.synchronize()

    def _is_exact_array(self, value: Any) -> bool:
        if self.torch is not None:
            return type(value) is self.torch.Tensor
        import numpy as np

        return type(value) is np.ndarray

    def _outputs(self, returned: Any, args: list[Any]) -> tuple[list[Any] | None, str]:
        """The call's outputs as a plain list, or None and the offending type's name.

        A returning task accepts exactly an array or a tuple of arrays (no subclasses, no lazy
        objects); an in-place task's outputs are the arguments it wrote, and it must return None.
        """
        if self.output_args:
            if returned is not None:
                return None, f"{type(returned).__module__}.{type(returned).__qualname__} (an in-place call returns None)"
            return [args[i] for i in self.output_args], "exact"
        if self._is_exact_array(returned):
            return [returned], "exact"
        if type(returned) is tuple and returned and all(self._is_exact_array(v) for v in returned):
            return list(returned), "exact"
        return None, f"{type(returned).__module__}.{type(returned).__qualname__}"

    # --- operations ---------------------------------------------------------------------------

    def load(
        self, solution_path: str, entry_point: str, compile_cache: str | None, output_args: list[int], inputs: dict[str, Any]
    ) -> dict[str, Any]:
        self.solution_path, self.entry_point = solution_path, entry_point
        self.output_args = list(output_args)
        self.inputs = dict(inputs)
        if self.inputs:
            from apex_core.tasks.schema import load_reference

            self.make_inputs = load_reference(str(self.inputs["ref"]))
        if compile_cache:
            os.environ["TRITON_CACHE_DIR"] = compile_cache
        if Path(solution_path).suffix in native.COMPILED_SUFFIXES:
            return self._load_compiled(Path(solution_path))
        spec = importlib.util.spec_from_file_location("apex_solution", self.solution_path)
        if spec is None or spec.loader is None:
            return {"ok": False, "kind": "compile_error", "message": f"cannot import {self.solution_path}"}
        module = importlib.util.module_from_spec(spec)
        sys.modules["apex_solution"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # anything the import raises is the solution's compile error
            return {"ok": False, "kind": "compile_error", "message": describe_exception(exc, self.solution_path)}
        function = getattr(module, self.entry_point, None)
        if not callable(function):
            return {
                "ok": False,
                "kind": "compile_error",
                "message": f"the solution defines no callable '{self.entry_point}'",
            }
        self.function = function
        self.own_kernels = triton_kernel_names(module)
        return {"ok": True, "own_kernels": self.own_kernels}

    def _load_compiled(self, source: Path) -> dict[str, Any]:
        try:
            module = native.build_extension(source, source.parent / "build")
        except native.ToolchainMissing as missing:
            return {"ok": False, "kind": "infra_error", "message": str(missing)}
        except native.CompileError as error:
            return {"ok": False, "kind": "compile_error", "message": str(error)}
        except BaseException as exc:  # importing the built module ran its static initializers
            return {"ok": False, "kind": "compile_error", "message": describe_exception(exc, str(source))}
        function = getattr(module, self.entry_point, None)
        if not callable(function):
            return {"ok": False, "kind": "compile_error", "message": f"the extension binds no '{self.entry_point}' (m.def)"}
        self.function = function
        self.own_kernels = native.kernel_names(source.read_text(errors="replace"))
        return {"ok": True, "own_kernels": self.own_kernels}

    def draw(self, shape: dict[str, int], seed: int, strided: tuple[int, ...] = ()) -> list[Any]:
        """The input set the judge draws for ``seed``: same generator, same kind of device."""
        from apex_core.kernels import seeded

        assert self.make_inputs is not None
        return seeded.draw(self.make_inputs, shape, str(self.inputs["dtype"]), seed, self.device, dict(self.inputs["params"]), strided)

    def call(
        self, shape: dict[str, int], seed: int, strided: tuple[int, ...] = (), digest_key: int = 0
    ) -> tuple[dict[str, Any], Payload | bytes]:
        """One checked call on the inputs of ``seed``; replies with the outputs and the digests of
        the arguments afterwards (under the judge's ``digest_key``), from which the judge decides
        whether the call changed its inputs."""
        assert self.function is not None
        args = self.draw(shape, seed, strided)
        try:
            output = self.function(*args)
            self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}, b""
        outputs, kind = self._outputs(output, args)
        if outputs is None:
            return {"ok": True, "output_type": kind}, b""
        encoded = encode_values(outputs)
        devices = sorted({str(o.device) for o in outputs}) if self.torch is not None else ["cpu"]
        # Declared outputs (a KV cache) are meant to change: no digest of them.
        digests = input_digests(args, digest_key, skip=tuple(self.output_args))
        reply = {"ok": True, "output_type": "exact", "outputs": len(outputs), "output_devices": devices,
                 "input_digests": digests}
        return reply, encoded

    # --- timing -------------------------------------------------------------------------------
    #
    # The judge stages a pool of distinct inputs, for warming up and other untimed calls. Timed
    # calls run on a few "call buffers" whose contents are drawn afresh before every call, from a
    # seed of that call alone (``rotation``): a cache keyed on pointers, shapes or contents returns
    # stale outputs, which the judge catches when it checks the outputs of the timed calls.

    def stage(self, shape: dict[str, int], seeds: list[int], buffers: int) -> dict[str, Any]:
        """Draw the input sets of a timed shape, compile for it, then pin this process to its core.

        Until now the worker ran on the cores no timing uses (all of them for compiling); the first
        call at this shape compiles whatever it needs there. Only then is it pinned: baseline and
        candidate share one timing core, so that neither is timed on a faster one. The current
        stage can be kept under a name (``keep``) and taken up again later (``select``).
        """
        if self.free_cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.free_cpus)  # a long-lived baseline worker was pinned at its last shape
        count = len(seeds)
        self.stage_shape = dict(shape)
        self.pool = [self.draw(shape, seed) for seed in seeds]
        rotation = CallRotation(count, buffers)
        self.buffers = [[_fresh_copy(v) for v in self.pool[item]] for item in rotation.held]
        return self._enter_stage(rotation)

    def keep(self, name: str) -> dict[str, Any]:
        """Keep the current stage (its input sets and call buffers) under ``name``."""
        self.kept_stages[name] = (self.stage_shape, self.pool, self.buffers)
        while len(self.kept_stages) > KEPT_STAGES:
            self.kept_stages.pop(next(iter(self.kept_stages)))
        return {"ok": True}

    def select(self, name: str) -> dict[str, Any]:
        """Take up a kept stage again: its inputs and call buffers, in the memory they had.

        A GPU process times a short kernel a few percent differently from one staging to the next
        (docs/benchmarks.md), so the judge times a solution on the very stage on which this worker
        timed our baseline before the solution was imported (``calibration.calibrate``).
        """
        if name not in self.kept_stages:
            return {"ok": False, "kind": "infra_error", "message": f"no kept stage {name!r}"}
        if self.free_cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.free_cpus)
        self.stage_shape, self.pool, self.buffers = self.kept_stages[name]
        return self._enter_stage(CallRotation(len(self.pool), len(self.buffers)))

    def release(self) -> dict[str, Any]:
        """Drop every stage and the flush buffer, then return the device memory they used.

        An idle baseline worker kept for the task's next grading held its last stage: on an
        80 GB H100, `apex tasks verify` of one MoE task left 22 GiB staged in such a worker and
        the next tasks' workers ran out of memory (benchmarks/results, 2026-12-06). The next
        grading stages afresh anyway, so nothing of value is lost.
        """
        self.pool, self.buffers, self.kept_stages, self.timed_outputs = [], [], {}, {}
        self.stage_shape, self.flush_buffer = {}, None
        self.rotation = CallRotation(1, 1)
        release_cached_device_memory(self.torch)
        return {"ok": True}

    def _enter_stage(self, rotation: CallRotation) -> dict[str, Any]:
        """Start the timing state of the current stage, compile for it with one call, then pin."""
        self.rotation = rotation
        self.timed_outputs = {}
        assert self.function is not None
        try:
            self.function(*self.pool[0])
            self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        if self.cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {int(self.cpu)})
        return {"ok": True}

    def _fill_fresh(self, slot: int, seed: int) -> list[Any]:
        """Refill ``slot`` with the inputs of ``seed``, drawn now, in the buffer's own memory."""
        for target, source in zip(self.buffers[slot], self.draw(self.stage_shape, seed)):
            _copy_into(target, source)
        return self.buffers[slot]

    def warmup(self, min_calls: int, min_seconds: float) -> dict[str, Any]:
        """Call until warm; reply with the host's launch time (90th percentile of recording the
        start event, the call and the end event, without waiting for the device), from which the
        judge sizes the launch cover, and calibrate the device spin now that the clocks are up."""
        assert self.function is not None
        if not self.pool:
            return {"ok": False, "kind": "infra_error", "message": "nothing is staged to warm up on: 'stage' or 'select' first"}
        calls, start = 0, _perf_counter_ns()
        launches: list[int] = []
        timers = self.timers
        try:
            while calls < min_calls or (_perf_counter_ns() - start) / 1e9 < min_seconds:
                args = self.pool[calls % len(self.pool)]
                began = _perf_counter_ns()
                if timers is not None:
                    timers.record(timers.start)
                self.function(*args)
                if timers is not None:
                    timers.record(timers.end)
                launches.append(_perf_counter_ns() - began)
                calls += 1
            self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        if timers is not None:
            timers.calibrate()
        warm = sorted(launches[2:] or launches)
        return {"ok": True, "calls": calls, "launch_ns": warm[int(0.9 * (len(warm) - 1))]}

    def time_samples(self, reps: int, flush_bytes: int, cover_ns: int, request_key: int) -> dict[str, Any]:
        """``reps`` timed calls, each on inputs drawn afresh (outside the timed region) from the
        seed ``rotation`` derives from ``request_key`` for it."""
        assert self.function is not None
        samples: list[int] = []
        timers = self.timers
        calls = self.rotation.timed_request(reps, request_key)
        drawn: list[Any] | None = None  # the next call's inputs, when drawn ahead
        try:
            for index, (slot, seed) in enumerate(calls):
                args = drawn if drawn is not None else self._fill_fresh(slot, seed)
                drawn = None
                if timers is not None:
                    if self.flush_buffer is None and flush_bytes > 0:
                        self.flush_buffer = timers.new_flush_buffer(flush_bytes)
                    if self.flush_buffer is not None:
                        timers.flush(self.flush_buffer)
                    timers.cover_launch(cover_ns)
                    timers.record(timers.start)
                    output = self.function(*args)
                    timers.record(timers.end)
                    # The next call's inputs are drawn now, queued behind this call's end event, so
                    # that the host's draw overlaps the device's cover and call instead of leaving
                    # the device idle after the synchronization; the next flush still comes after
                    # them. Only into another buffer than this call's, never past the request's end.
                    following = calls[index + 1] if index + 1 < len(calls) else None
                    if following is not None and following[0] != slot:
                        drawn = self._fill_fresh(*following)
                    timers.synchronize()
                    samples.append(round(timers.elapsed(timers.start, timers.end) * 1e6))
                else:
                    t0 = _perf_counter_ns()
                    output = self.function(*args)
                    samples.append(_perf_counter_ns() - t0)
                self.timed_outputs[slot] = (output, args)
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        return {"ok": True, "samples_ns": samples, "python_threads": threading.active_count()}

    def wall_check(self, calls: int, cover_ns: int, request_key: int) -> dict[str, Any]:
        """Per call, under the timed samples' launch cover: the events' time, and the host's wait
        from the end event's completion to the end of a device-wide synchronization (see
        ``wall_clock``). Each call on fresh inputs, as a timed call is (``request_key``)."""
        assert self.function is not None
        timers = self.timers
        if timers is None:
            return {"ok": True, "event_ns": [], "after_end_ns": []}
        event_ns: list[int] = []
        after_end_ns: list[int] = []
        try:
            for i in range(calls):
                args = self._fill_fresh(i % len(self.buffers), call_seed(request_key, i))
                timers.synchronize()
                timers.cover_launch(cover_ns)
                timers.record(timers.start)
                self.function(*args)
                timers.record(timers.end)
                timers.event_synchronize(timers.end)
                ended = _perf_counter_ns()
                timers.synchronize()
                after_end_ns.append(_perf_counter_ns() - ended)
                event_ns.append(round(timers.elapsed(timers.start, timers.end) * 1e6))
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        return {"ok": True, "event_ns": event_ns, "after_end_ns": after_end_ns}

    def profile_call(self, request_key: int) -> dict[str, Any]:
        """The device kernels one call launches, with their device time, from PyTorch's profiler;
        the call runs on fresh inputs, as a timed call does, so a memo cannot answer it."""
        assert self.function is not None and self.torch is not None
        from torch.profiler import ProfilerActivity, profile

        args = self._fill_fresh(0, call_seed(request_key, 0))
        self._synchronize()
        try:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
                self.function(*args)
                self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        kernels: list[list[Any]] = []
        for event in trace.events():
            if event.device_type != self.torch.autograd.DeviceType.CUDA:
                continue
            elapsed = float(getattr(event, "device_time", 0.0) or getattr(event, "cuda_time", 0.0) or 0.0)
            # For device events the profiler's resource id is the stream the kernel ran on.
            kernels.append([event.name, elapsed, int(getattr(event, "device_resource_id", -1))])
        return {"ok": True, "kernels": kernels, "own_kernels": self.own_kernels}

    def timed_outputs_payload(self, slots: list[int]) -> tuple[dict[str, Any], Payload | bytes]:
        """The last outputs of the call buffers the judge picked (it picks after timing, at random,
        and knows on its own which input set each held)."""
        values: list[Any] = []
        for slot in slots:
            if slot not in self.timed_outputs:
                continue
            returned, args = self.timed_outputs[slot]
            outputs, kind = self._outputs(returned, args)
            if outputs is None:
                return {"ok": True, "output_type": kind}, b""
            values.extend(outputs)
        return {"ok": True, "output_type": "exact"}, encode_values(values)

    def handle(self, request: protocol.Request) -> tuple[dict[str, Any], Payload | bytes]:
        match request:
            case protocol.Load():
                return self.load(request.solution_path, request.entry_point, request.compile_cache,
                                 list(request.output_args), request.inputs), b""
            case protocol.Call():
                return self.call(request.shape, request.seed, request.strided, request.digest_key)
            case protocol.Stage():
                return self.stage(request.shape, list(request.seeds), request.buffers), b""
            case protocol.Keep():
                return self.keep(request.name), b""
            case protocol.Select():
                return self.select(request.name), b""
            case protocol.Warmup():
                return self.warmup(request.min_calls, request.min_seconds), b""
            case protocol.Time():
                return self.time_samples(request.reps, request.flush_bytes, request.cover_ns, request.request_key), b""
            case protocol.TimedOutputs():
                return self.timed_outputs_payload(list(request.slots))
            case protocol.Profile():
                return self.profile_call(request.request_key), b""
            case protocol.WallCheck():
                return self.wall_check(request.calls, request.cover_ns, request.request_key), b""
            case protocol.Release():
                return self.release(), b""
        return {"ok": False, "kind": "infra_error", "message": f"no handler for '{request.op}'"}, b""

    def serve(self, read_fd: int, write_fd: int, shared: wire.SharedFile | None = None) -> None:
        """Answer requests until the judge says exit; every reply echoes its request's nonce."""
        while True:
            try:
                header, payload = wire.receive(read_fd)
            except wire.ChannelClosed:
                return
            nonce = header.pop("nonce", None)
            try:
                request = protocol.parse(header)
            except protocol.ProtocolError as error:
                wire.send(write_fd, {"ok": False, "kind": "infra_error", "message": str(error), "nonce": nonce})
                continue
            if isinstance(request, protocol.Exit):
                return
            reply, out = self.handle(request)
            wire.send(write_fd, {**reply, "nonce": nonce}, out, shared)


def main(argv: list[str]) -> int:
    read_fd, write_fd = int(argv[1]), int(argv[2])
    shared = wire.SharedFile(int(argv[3])) if len(argv) > 3 else None
    header, _ = wire.receive(read_fd)
    nonce = header.pop("nonce", None)
    init = protocol.parse(header)
    assert isinstance(init, protocol.Init), f"the first request must be 'init', not '{init.op}'"
    worker = Worker(init.library, init.device)
    worker.cpu = init.cpu
    wire.send(write_fd, {"ok": True, "pid": os.getpid(), "nonce": nonce})
    worker.serve(read_fd, write_fd, shared)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
