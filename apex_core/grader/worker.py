"""The child process that runs one solution (candidate or baseline) for the judge.

It imports the solution, then serves the judge's requests over the pipe pair it was given: call the
entry point on inputs, stage inputs for timing, warm up, take timed samples. It never sees the
reference or the verdict; it only reports what happened. Run as
``python -m apex_core.grader.worker READ_FD WRITE_FD``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from apex_core.grader import wire

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


class Worker:
    def __init__(self, solution_path: str, entry_point: str, library: str, device: str) -> None:
        self.solution_path = solution_path
        self.entry_point = entry_point
        self.library = library
        self.device = device
        self.function: Callable[..., Any] | None = None
        self.staged: list[list[Any]] = []
        self.flush_buffer: Any = None
        self.torch: ModuleType | None = None
        if library == "torch":
            import torch

            self.torch = torch

    # --- helpers ----------------------------------------------------------------------------

    def _to_device(self, values: list[Any]) -> list[Any]:
        torch = self.torch
        if torch is None:
            return values
        return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values]

    def _synchronize(self) -> None:
        torch = self.torch
        if torch is not None and self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def _is_exact_output_type(self, value: Any) -> bool:
        if self.torch is not None:
            return type(value) is self.torch.Tensor
        import numpy as np

        return type(value) is np.ndarray

    # --- operations ---------------------------------------------------------------------------

    def load(self) -> dict[str, Any]:
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
        return {"ok": True}

    def call(self, args: list[Any]) -> tuple[dict[str, Any], bytes]:
        assert self.function is not None
        args = self._to_device(args)
        try:
            output = self.function(*args)
            self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}, b""
        if not self._is_exact_output_type(output):
            kind = f"{type(output).__module__}.{type(output).__qualname__}"
            return {"ok": True, "output_type": kind}, b""
        payload = wire.encode_values([output, *args], self.library)
        device = str(output.device) if self.torch is not None else "cpu"
        return {"ok": True, "output_type": "exact", "output_device": device}, payload

    def warmup(self, min_calls: int, min_seconds: float) -> dict[str, Any]:
        assert self.function is not None
        calls, start = 0, _perf_counter_ns()
        try:
            while calls < min_calls or (_perf_counter_ns() - start) / 1e9 < min_seconds:
                self.function(*self.staged[calls % len(self.staged)])
                calls += 1
            self._synchronize()
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        return {"ok": True, "calls": calls}

    def time_samples(self, reps: int, flush_bytes: int, sleep_cycles: int) -> dict[str, Any]:
        assert self.function is not None
        samples: list[int] = []
        torch = self.torch
        on_gpu = torch is not None and self.device.startswith("cuda")
        try:
            if on_gpu:
                assert torch is not None
                if self.flush_buffer is None and flush_bytes > 0:
                    self.flush_buffer = torch.empty(flush_bytes // 4, dtype=torch.int32, device=self.device)
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                sleep = getattr(torch.cuda, "_sleep", None)
                for i in range(reps):
                    args = self.staged[i % len(self.staged)]
                    if self.flush_buffer is not None:
                        self.flush_buffer.zero_()
                    if sleep is not None and sleep_cycles > 0:
                        # Keep the device busy while the host launches the call, so that the
                        # events time the kernels, not the Python launch overhead.
                        sleep(sleep_cycles)
                    start.record()
                    self.function(*args)
                    end.record()
                    torch.cuda.synchronize()
                    samples.append(int(start.elapsed_time(end) * 1e6))
            else:
                for i in range(reps):
                    args = self.staged[i % len(self.staged)]
                    t0 = _perf_counter_ns()
                    self.function(*args)
                    samples.append(_perf_counter_ns() - t0)
        except BaseException as exc:
            return {"ok": False, "kind": "runtime_error", "message": describe_exception(exc, self.solution_path)}
        return {"ok": True, "samples_ns": samples}

    def serve(self, read_fd: int, write_fd: int) -> None:
        while True:
            try:
                header, payload = wire.receive(read_fd)
            except wire.ChannelClosed:
                return
            op = header.get("op")
            if op == "load":
                wire.send(write_fd, self.load())
            elif op == "call":
                reply, out = self.call(wire.decode_values(payload, self.library))
                wire.send(write_fd, reply, out)
            elif op == "stage":
                count = int(header["count"])
                values = wire.decode_values(payload, self.library)
                size = len(values) // count
                self.staged = [self._to_device(values[i * size : (i + 1) * size]) for i in range(count)]
                wire.send(write_fd, {"ok": True})
            elif op == "warmup":
                wire.send(write_fd, self.warmup(int(header["min_calls"]), float(header["min_seconds"])))
            elif op == "time":
                wire.send(
                    write_fd,
                    self.time_samples(
                        int(header["reps"]), int(header.get("flush_bytes", 0)), int(header.get("sleep_cycles", 0))
                    ),
                )
            elif op == "exit":
                return
            else:
                wire.send(write_fd, {"ok": False, "kind": "infra_error", "message": f"unknown op {op!r}"})


def main(argv: list[str]) -> int:
    read_fd, write_fd = int(argv[1]), int(argv[2])
    header, _ = wire.receive(read_fd)
    cpu = header.get("cpu")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        # Baseline and candidate workers share one core so that neither is timed on a faster one.
        os.sched_setaffinity(0, {int(cpu)})
    worker = Worker(header["solution_path"], header["entry_point"], header["library"], header["device"])
    wire.send(write_fd, {"ok": True, "pid": os.getpid()})
    worker.serve(read_fd, write_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
