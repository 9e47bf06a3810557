"""A worker child process as the judge sees it: started clean, spoken to over its pipes, killed whole.

Each worker runs under a reaper (``reaper.py``) in a new session, with a scratch directory as
working directory and home, stdin closed, no descriptors but its two pipe ends and the shared file
for large replies (all three the judge's own), an environment built from an allow-list, resource
limits, and, unless it only runs our own code (``WorkerSpec.trusted``) or the user asked for none
(``WorkerSpec.unconfined``), confined by ``sandbox.py``: not the judge's user, its own namespaces
and a mount view in which only its scratch directory is writable. Closing it kills every process
below the reaper at once, detached ones included (the reaper is their subreaper); the reaper
collects them and exits in the background, and its process group is killed if it does not.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from apex_core.grader.isolation import protocol, sandbox, wire
from apex_core.grader.isolation.scratch import new_scratch

PACKAGE_PARENT = Path(__file__).resolve().parents[3]
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


SANDBOX_USER = "nobody"


@functools.lru_cache(maxsize=1)
def sandbox_identity() -> tuple[int, int] | None:
    """(uid, gid) to run solutions as when the judge is root, if that user can start our Python
    as the machine's file system stands (not through a sandbox's view): what the Magpie backend,
    which runs solutions in its own processes, and the judge's choice of compile-cache root use."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(os.environ.get("APEX_SANDBOX_USER", SANDBOX_USER))
    except KeyError:
        return None
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import apex_core"],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            env={"PYTHONPATH": str(PACKAGE_PARENT), "PATH": "/usr/bin:/bin"},
            cwd="/",
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if probe.returncode != 0:
        return None
    seal_reference_solutions()
    return (entry.pw_uid, entry.pw_gid)


def seal_reference_solutions() -> None:
    """Make our reference solutions unreadable to the sandbox user before any solution runs as it.

    They are the bar and the SFT targets; a graded solution that could read them could submit
    them. Only the judge (root, when a sandbox user is in use) still reads them.
    """
    directory = PACKAGE_PARENT / "reference_solutions"
    if directory.is_dir():
        os.chmod(directory, 0o700)


TMP_BYTES = 1024**3
"""Size cap of a confined worker's private /tmp and /dev/shm, each."""
COPY_BACK_BYTES = 256 * 1024**2
"""The most a confined worker's compile-cache copy returns to the shared compile cache."""


@functools.lru_cache(maxsize=1)
def confinement_problem() -> str | None:
    """Why a solution cannot be confined on this machine (one line), or None when it can.

    Found the only sure way, once per process: a confined start of our Python, importing what a
    worker imports first, exactly as a worker starts.
    """
    scratch = Path(tempfile.mkdtemp(prefix="apex-probe-"))
    try:
        identity = sandbox.candidate_identity()
        if identity is not None:
            os.chown(scratch, *identity)
        config = {"scratch": str(scratch), "confine": {"writable": [], "tmp_bytes": 16 * 1024**2}}
        probe = [sys.executable, "-s", "-c", "import apex_core.grader.isolation.worker"]
        done = subprocess.run(
            [sys.executable, "-s", "-m", "apex_core.grader.isolation.reaper", json.dumps(config), "--", *probe],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=scratch,
            env=worker_environment(scratch),
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"the confined probe did not run: {error}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode == 0:
        return None
    lines = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"the confined probe exited with code {done.returncode}"


def _chown_tree(root: Path, identity: tuple[int, int]) -> None:
    os.chown(root, *identity)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(directory, name), *identity, follow_symlinks=False)


def _copy_back(local: Path, compile_cache: Path) -> None:
    """Copy the regular files a (dead) confined worker left in ``local`` into ``compile_cache``,
    up to COPY_BACK_BYTES; links, devices and pipes it may have made there are skipped."""
    budget = COPY_BACK_BYTES
    for directory, _, files in os.walk(local):
        relative = Path(directory).relative_to(local)
        for name in files:
            source = Path(directory, name)
            try:
                info = source.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_size > budget:
                    continue
                target = compile_cache / relative / name
                if target.exists() and target.stat().st_size == info.st_size:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as reader:
                    temporary = target.with_name(f".{name}.{secrets.token_hex(4)}")
                    temporary.write_bytes(reader.read(budget))
                    temporary.replace(target)
                budget -= info.st_size
            except OSError:
                continue


PIPE_BYTES = 1 << 20


def _widen_pipe(fd: int) -> None:
    """Give a pipe 1 MiB of buffer instead of 64 KiB: staged inputs move in fewer, larger writes."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:
        pass  # above the system's pipe-max-size: the default buffer still works


def default_memory_bytes() -> int:
    """Half the machine's memory, at most 16 GiB: what one solution's processes may hold resident."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 * 1024**3
    return int(min(total // 2, 16 * 1024**3))


class WorkerFailure(Exception):
    """The worker died, hung or broke the protocol; ``kind`` is 'crash', 'timeout' or 'tampering'."""

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


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker is started with; workers with equal specs are interchangeable (pooling)."""

    library: str
    device: str
    extra_env: tuple[tuple[str, str], ...] = ()
    cpu: int | None = None
    memory_bytes: int | None = None
    limit_address_space: bool = False
    trusted: bool = False
    """Runs only our own code (the baseline): unconfined, as the judge's user and in the judge's
    namespaces, out of every confined solution's sight (a solution sees only its own PID
    namespace, so it cannot signal, slow or inspect it)."""
    unconfined: bool = False
    """Run a solution without the sandbox (``GradeOptions.unconfined``): as the judge's user, with
    its view of the machine. Only when the user asked for it; the result records it."""

    @property
    def confined(self) -> bool:
        return not (self.trusted or self.unconfined)


def startup_cpus(timing_cores: Collection[int]) -> list[int] | None:
    """The cores a starting worker may use: all but ``timing_cores``, the ones graded calls are
    timed on (``GraderState.timing_cores``).

    Workers start (import torch, create a device context) in the background while other gradings
    measure; keeping them off the timing cores keeps them from disturbing those measurements. A
    worker moves to its timing core only when it loads a solution. None on machines too small to
    set cores aside.
    """
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    reserved = set(timing_cores)
    free = [c for c in cores if c not in reserved]
    return free if len(free) >= 2 and reserved else None


@dataclass(frozen=True)
class PendingRequest:
    """A request sent to a worker whose reply has not been read yet."""

    op: str
    nonce: str
    deadline: float
    timeout_s: float


class WorkerProcess:
    """One child process that imports its libraries at start and loads one solution later."""

    def __init__(self, spec: WorkerSpec, timeout_s: float = 180.0, timing_cores: Collection[int] = ()) -> None:
        """Start the worker (it imports its libraries now), away from ``timing_cores``
        (``startup_cpus``); the judge passes the cores its gradings time on."""
        self.spec = spec
        self.timeout_s = timeout_s
        self._closed = False
        self._close_lock = threading.Lock()
        self.memory_bytes = spec.memory_bytes or default_memory_bytes()
        self.scratch = new_scratch()
        self.log_path = self.scratch / "worker.log"
        # (uid, gid) the solution runs as outside its namespaces when the judge is root.
        self.identity = sandbox.candidate_identity() if spec.confined else None
        if self.identity is not None:
            os.chown(self.scratch, *self.identity)
        # (copy under the scratch directory, the compile cache it came from and goes back to).
        self._cache_copies: list[tuple[Path, Path]] = []
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        for fd in (self._to_worker, from_worker_w):
            _widen_pipe(fd)
        # Where the worker leaves large replies (call outputs); None where the system has none.
        self._shared = wire.SharedFile.create()
        passed = (to_worker_r, from_worker_w) + ((self._shared.fd,) if self._shared else ())
        config = {
            "pass_fds": list(passed),
            "scratch": str(self.scratch),
            "memory_bytes": self.memory_bytes,
            "address_space_bytes": self.memory_bytes + 2 * 1024**3 if spec.limit_address_space else None,
            "cpu_seconds": int(max(600, 20 * timeout_s)),
            "file_bytes": 1024**3,
            "cpus": startup_cpus(timing_cores),
            "confine": {"writable": [], "tmp_bytes": TMP_BYTES} if spec.confined else None,
        }
        worker_argv = [sys.executable, "-s", "-m", "apex_core.grader.isolation.worker", *(str(fd) for fd in passed)]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-s", "-m", "apex_core.grader.isolation.reaper", json.dumps(config), "--", *worker_argv],
                pass_fds=passed,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.scratch,
                env=worker_environment(self.scratch, dict(spec.extra_env)),
                start_new_session=True,
            )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.request(protocol.Init(library=spec.library, device=spec.device, cpu=spec.cpu))

    def alive(self) -> bool:
        return self.process.poll() is None

    def load(
        self,
        solution: Path,
        entry_point: str,
        compile_cache: Path | None = None,
        output_args: tuple[int, ...] = (),
        inputs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Copy ``solution`` into the scratch directory and import it there.

        ``inputs`` names the task's input generator (``ref``, ``dtype``, ``params``), from which the
        worker draws the inputs of the seeds it is sent.
        """
        copy = self.scratch / solution.name
        shutil.copyfile(solution, copy)
        if compile_cache is not None:
            compile_cache.mkdir(parents=True, exist_ok=True)
            if self.spec.confined and not compile_cache.resolve().is_relative_to(self.scratch.resolve()):
                compile_cache = self._local_copy(compile_cache)
        if self.identity is not None:
            os.chown(copy, *self.identity)
            if compile_cache is not None:
                _chown_tree(compile_cache, self.identity)
        reply, _ = self.request(
            protocol.Load(
                solution_path=str(copy),
                entry_point=entry_point,
                output_args=tuple(output_args),
                compile_cache=str(compile_cache) if compile_cache else None,
                inputs=inputs or {},
            )
        )
        return reply

    def _local_copy(self, compile_cache: Path) -> Path:
        """A confined worker sees no directory but its scratch: it compiles into a copy of
        ``compile_cache`` there, whose new files go back when the worker is closed."""
        local = self.scratch / f"compile-cache-{len(self._cache_copies)}"
        shutil.copytree(compile_cache, local, symlinks=True, dirs_exist_ok=True)
        self._cache_copies.append((local, compile_cache))
        return local

    def log_tail(self, limit: int = 1500) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-limit:].strip()

    def request(
        self, message: protocol.Request, timeout_s: float | None = None, max_payload: int = wire.MAX_PAYLOAD_BYTES
    ) -> tuple[dict[str, Any], memoryview | bytes]:
        return self.collect(self.submit(message, timeout_s), max_payload)

    def submit(self, message: protocol.Request, timeout_s: float | None = None) -> PendingRequest:
        """Send a request without waiting: the judge can work (compute the reference) meanwhile.
        One request at a time; ``collect`` its reply before submitting the next."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        pending = PendingRequest(message.op, secrets.token_hex(16), time.monotonic() + timeout, timeout)
        with self._failures(pending):
            wire.send(self._to_worker, {**message.header(), "nonce": pending.nonce})
        return pending

    def collect(
        self, pending: PendingRequest, max_payload: int = wire.MAX_PAYLOAD_BYTES
    ) -> tuple[dict[str, Any], memoryview | bytes]:
        """The reply to ``pending``; a missing, late, forged or oversized one is a WorkerFailure."""
        with self._failures(pending):
            remaining = max(pending.deadline - time.monotonic(), 0.0)
            reply, reply_payload = wire.receive(self._from_worker, remaining, self._shared, max_payload)
        if reply.get("nonce") != pending.nonce:
            self.kill()
            raise WorkerFailure("tampering", f"a reply to '{pending.op}' did not carry the judge's nonce: it was forged")
        return reply, reply_payload

    @contextlib.contextmanager
    def _failures(self, pending: PendingRequest) -> Iterator[None]:
        """A broken channel as the outcome it means: a timeout, or the worker's death and why."""
        try:
            yield
        except wire.ChannelTimeout:
            self.kill()
            raise WorkerFailure("timeout", f"no answer to '{pending.op}' within {pending.timeout_s:g} s") from None
        except (wire.ChannelClosed, BrokenPipeError, ValueError):
            try:
                code: int | None = self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            from apex_core.grader.isolation.reaper import SANDBOX_FAILED_EXIT

            if code == SANDBOX_FAILED_EXIT:
                raise WorkerFailure("infra_error", f"the worker could not be started confined: {self.log_tail(600)}") from None
            raise WorkerFailure("crash", f"the process died during '{pending.op}' ({self._death(code)})") from None

    def _death(self, code: int | None) -> str:
        """Why the worker ended, from the reaper's exit code and marker."""
        from apex_core.grader.isolation.reaper import MEMORY_EXCEEDED_EXIT, MEMORY_MARKER

        if code == MEMORY_EXCEEDED_EXIT and (self.scratch / MEMORY_MARKER).exists():
            return f"it exceeded the memory limit of {self.memory_bytes / 1024**3:.1f} GiB resident"
        if code is None:
            detail = "it stopped answering"
        elif code > 128:
            detail = f"killed by signal {code - 128}"
        else:
            detail = f"exit code {code}"
        tail = self.log_tail(600)
        return detail + (f": {tail}" if tail else "")

    def kill(self) -> None:
        """Kill everything below the reaper now; the reaper collects it and exits in the background.

        The grading goes on (to its integrity check) as soon as every process below the reaper has
        SIGKILL pending, since none of them can act any more; waiting for the reaper, that is for
        the worker's device context to be torn down, cost every grading time (docs/grader.md, 'Measured reasons').
        """
        from apex_core.grader.isolation.reaper import kill_below

        if self.process.poll() is None:
            kill_below(self.process.pid)
            try:
                self.process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        threading.Thread(target=self._collect_reaper, name="apex-reaper-wait", daemon=True).start()

    def _collect_reaper(self) -> None:
        """Wait for the reaper; one that does not exit is killed with its whole process group."""
        try:
            self.process.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Kill the worker and release its descriptors and scratch; only the first call acts.

        Closing twice used to close the pipe descriptors twice: by then their numbers could
        belong to another grading's channel in this process, which then read a stranger's replies
        ("did not carry the judge's nonce") or failed with EBADF (issue 13).
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        # No polite exit first: the worker's own shutdown (interpreter, device context) took about
        # a second of every grading, and nothing of it is worth keeping.
        self.kill()
        for local, compile_cache in self._cache_copies:
            _copy_back(local, compile_cache)
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._shared is not None:
            self._shared.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
