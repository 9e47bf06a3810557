"""A worker child process as the judge sees it: started clean, spoken to over its pipes, killed whole.

Each worker runs in a new session (its own process group) with a scratch directory as working
directory and home, stdin closed, no descriptors but its two pipe ends, and an environment built
from an allow-list. Closing it kills the whole group, so children the solution started go too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from apex_core.grader import wire

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
PASSED_THROUGH_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "TRITON_INTERPRET",
    "LD_LIBRARY_PATH",
    "ROCM_PATH",
    "CUDA_HOME",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OMP_NUM_THREADS",
)


class WorkerFailure(Exception):
    """The worker died, hung or broke the protocol; ``kind`` is 'crash' or 'timeout'."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def worker_environment(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TRITON_CACHE_DIR": str(scratch / ".triton-cache"),
    }
    for name in PASSED_THROUGH_ENV:
        if name in os.environ:
            env[name] = os.environ[name]
    python_path = [str(PACKAGE_PARENT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(python_path)
    env.update(extra or {})
    return env


class WorkerProcess:
    """One solution loaded in one child process."""

    def __init__(
        self,
        solution: Path,
        entry_point: str,
        library: str,
        device: str,
        timeout_s: float,
        extra_env: dict[str, str] | None = None,
        cpu: int | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.scratch = Path(tempfile.mkdtemp(prefix="apex-worker-"))
        self.solution_copy = self.scratch / solution.name
        shutil.copyfile(solution, self.solution_copy)
        self.log_path = self.scratch / "worker.log"
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-s", "-m", "apex_core.grader.worker", str(to_worker_r), str(from_worker_w)],
                pass_fds=(to_worker_r, from_worker_w),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.scratch,
                env=worker_environment(self.scratch, extra_env),
                start_new_session=True,
            )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.request(
            {
                "op": "init",
                "solution_path": str(self.solution_copy),
                "entry_point": entry_point,
                "library": library,
                "device": device,
                "cpu": cpu,
            }
        )

    def log_tail(self, limit: int = 1500) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-limit:].strip()

    def request(self, header: dict[str, Any], payload: bytes = b"", timeout_s: float | None = None) -> tuple[dict[str, Any], bytes]:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            wire.send(self._to_worker, header, payload)
            return wire.receive(self._from_worker, timeout=timeout)
        except wire.ChannelTimeout:
            self.kill()
            raise WorkerFailure("timeout", f"no answer to '{header.get('op')}' within {timeout:g} s") from None
        except (wire.ChannelClosed, BrokenPipeError, ValueError):
            code = self.process.poll()
            if code is None:
                time.sleep(0.2)
                code = self.process.poll()
            self.kill()
            detail = f"exit code {code}" if code is not None and code >= 0 else f"killed by signal {-(code or 0)}"
            tail = self.log_tail(600)
            raise WorkerFailure("crash", f"the process died during '{header.get('op')}' ({detail})" + (f": {tail}" if tail else "")) from None

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                wire.send(self._to_worker, {"op": "exit"})
                self.process.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
