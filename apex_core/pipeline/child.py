"""A pipeline run in a child process of its own, so that it restores the environment however its
caller goes away.

A run leaves no patch behind only when it can unwind: ``runner.run_pipeline`` turns SIGTERM into
SystemExit, but Python delivers signals to the main thread alone, and an MCP server runs its tools
on an event loop or in worker threads. There a stopped host (SIGTERM or SIGKILL to the server)
ended the process mid-stage and the patched site-packages stayed patched. Here the run is the main
thread of ``python -m apex_core.pipeline.child``, in a session of its own (a kill of the server's
process group does not reach it), and a daemon thread watches the parent: once the child has been
handed to another parent, the one that started it is gone, and the child sends itself SIGTERM, so
the run unwinds and restores.

The protocol: the parent writes one ``ChildRequest`` (JSON) to the child's stdin and closes it;
the child writes JSON lines on its stdout (progress, the run folder once it exists, then the run
folder when done or one line of user error). Everything else the child or the libraries it loads
print goes to its stderr. Lines are only ever progress to the parent: the result is the state the
run wrote to its folder (``load_run``), and a child that ends without a last line is a stopped
or crashed run, never a result.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TextIO

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from apex_core.errors import ApexUserError
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.state import RunState, load_run

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream, Process

log = logging.getLogger(__name__)

UNWIND_S = 60.0
"""How long a stopped child may take to unwind (close its workers, restore the patches) before it
is killed: restoring is file copies, seconds even for GPU models."""
WATCH_INTERVAL_S = 0.25
"""How often the child looks whether its parent is still there."""

ProgressSink = Callable[[float, str], Awaitable[None] | None]
"""Told each progress report of the child; may be a coroutine function (the MCP server's)."""
Started = Callable[[int, Path], object]
"""Told the child's pid and the run folder once the run has one."""


class ChildRequest(BaseModel):
    """What the parent asks of the child: ``runner.run_pipeline``'s arguments, and who the parent is."""

    config: RunConfig | None = None
    results_root: str
    resume: str | None = None
    only: tuple[str, ...] | None = None
    parent_pid: int = Field(description="the process that must stay alive for the run to go on")


class ProgressLine(BaseModel):
    event: Literal["progress"] = "progress"
    fraction: float
    message: str


class StartedLine(BaseModel):
    event: Literal["started"] = "started"
    run_dir: str


class FinishedLine(BaseModel):
    event: Literal["finished"] = "finished"
    run_dir: str


class ErrorLine(BaseModel):
    event: Literal["error"] = "error"
    message: str


ChildLine = Annotated[ProgressLine | StartedLine | FinishedLine | ErrorLine, Field(discriminator="event")]
_LINE = TypeAdapter(ChildLine)


class PipelineStopped(ApexUserError):
    """The child was stopped by a signal before the run finished; the run can be resumed."""


# --- the parent's side ------------------------------------------------------------------------------


async def run_in_child(config: RunConfig | None, results_root: Path, *, resume: Path | None = None,
                       only: Iterable[str] | None = None, progress: ProgressSink | None = None,
                       started: Started | None = None, unwind_s: float = UNWIND_S) -> RunState:
    """``runner.run_pipeline`` in a child process, awaited from an event loop (anyio).

    Cancelling the await (the tool call cancelled, the server shutting down) sends the child
    SIGTERM and waits up to ``unwind_s`` for it to restore and exit, then kills it. A user mistake
    in the child is raised here as ApexUserError with its one line."""
    import anyio

    request = ChildRequest(config=config, results_root=str(Path(results_root).resolve()),
                           resume=str(Path(resume).resolve()) if resume is not None else None,
                           only=tuple(only) if only is not None else None, parent_pid=os.getpid())
    process = await anyio.open_process(child_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                       env=child_environment(), start_new_session=True)
    run_dir: Path | None = None
    last: FinishedLine | ErrorLine | None = None
    try:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(request.model_dump_json().encode())
        await process.stdin.aclose()
        async for line in _lines(process.stdout):
            if isinstance(line, ProgressLine):
                if progress is not None:
                    told = progress(line.fraction, line.message)
                    if inspect.isawaitable(told):
                        await told
            elif isinstance(line, StartedLine):
                run_dir = Path(line.run_dir)
                if started is not None:
                    started(process.pid, run_dir)
            else:
                last = line
        code = await process.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(process, unwind_s)
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()
    if isinstance(last, ErrorLine):
        raise ApexUserError(last.message)
    if isinstance(last, FinishedLine) and code == 0:
        return load_run(Path(last.run_dir))
    raise _ended_early(code, run_dir)


def _ended_early(code: int, run_dir: Path | None) -> Exception:
    """Why the child gave no result: stopped by a signal (a user's or the system's doing; the run
    resumes), or crashed (Apex's fault; the traceback went to stderr)."""
    where = f" ({run_dir}; resume_run or apex run --resume goes on with it)" if run_dir else ""
    if code == 128 + signal.SIGTERM:  # the runner's SystemExit: it unwound
        return PipelineStopped(f"the pipeline run was stopped (SIGTERM) before it finished and restored its patches{where}")
    if code < 0:
        return PipelineStopped(f"the pipeline run was killed by signal {-code} before it finished{where}; "
                               "apex patch status says whether it left anything patched")
    return RuntimeError(f"the pipeline's process exited with status {code} before the run finished{where}; "
                        "its traceback is on stderr")


def run_in_child_blocking(config: RunConfig | None, results_root: Path, *, resume: Path | None = None,
                          only: Iterable[str] | None = None, progress: Callable[[float, str], None] | None = None,
                          started: Started | None = None, unwind_s: float = UNWIND_S) -> RunState:
    """``run_in_child`` for callers without an event loop (scripts, tests)."""
    import anyio

    async def go() -> RunState:
        return await run_in_child(config, results_root, resume=resume, only=only, progress=progress, started=started,
                                  unwind_s=unwind_s)

    return anyio.run(go)


def child_command() -> list[str]:
    return [sys.executable, "-m", "apex_core.pipeline.child"]


def child_environment() -> dict[str, str]:
    """This environment, with the folder this apex_core came from first on the path: the child
    runs the same Apex as its parent, whatever its working folder."""
    import apex_core

    root = str(Path(apex_core.__file__).resolve().parents[1])
    paths = [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


async def _lines(stream: ByteReceiveStream) -> AsyncIterator[ProgressLine | StartedLine | FinishedLine | ErrorLine]:
    """The child's protocol lines; anything unreadable is logged and passed over."""
    pending = b""
    async for chunk in stream:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            if not raw.strip():
                continue
            try:
                yield _LINE.validate_json(raw)
            except ValidationError:
                log.warning("pipeline child: passed over a line that is not the protocol's: %r", raw[:200])


async def _stop(process: Process, unwind_s: float) -> None:
    """SIGTERM (the run unwinds and restores), then SIGKILL if it has not exited in ``unwind_s``."""
    import anyio

    if process.returncode is not None:
        return
    try:
        process.terminate()
    except ProcessLookupError:
        return
    with anyio.move_on_after(unwind_s):
        await process.wait()
        return
    log.warning("pipeline child %s did not unwind within %.0f s after SIGTERM; killing it (apex patch status says "
                "what it left patched)", process.pid, unwind_s)
    process.kill()
    await process.wait()


# --- the child's side -------------------------------------------------------------------------------


class _Channel:
    """The child's private copy of its stdout; fd 1 itself then points at stderr, so that what
    libraries and compiled code print cannot be mistaken for a protocol line."""

    def __init__(self) -> None:
        self._out: TextIO = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        self._lock = threading.Lock()

    def send(self, line: BaseModel) -> None:
        """Write one line; with the parent gone nobody reads it, and the run must not fail for that
        in the middle of a stage (the watchdog stops it properly)."""
        text = json.dumps(line.model_dump(mode="json"), separators=(",", ":"))
        with self._lock:  # parallel kernels report from several threads
            try:
                self._out.write(text + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                pass


def watch_parent(parent_pid: int, interval_s: float = WATCH_INTERVAL_S) -> threading.Thread:
    """A daemon thread that sends this process SIGTERM once ``parent_pid`` is no longer its
    parent (it exited or was killed, and the child was handed on): the run then unwinds as when
    stopped. ``os.getppid`` works wherever Python does and sees a SIGKILL too."""
    def watch() -> None:
        pause = threading.Event()
        while os.getppid() == parent_pid:
            pause.wait(interval_s)
        try:
            os.write(2, f"apex pipeline child: its parent {parent_pid} is gone; stopping the run so that it restores\n".encode())
        except OSError:  # the host that read our stderr went too: what the unwinding prints must not fail it
            silent = os.open(os.devnull, os.O_WRONLY)
            os.dup2(silent, 1)
            os.dup2(silent, 2)
            os.close(silent)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="apex-parent-watch", daemon=True)
    thread.start()
    return thread


def main() -> int:
    """Run the request on stdin; 0 when the run finished, 2 after a user mistake (a SIGTERM ends
    the process through the runner's SystemExit once the run has restored)."""
    from apex_core.patcher import recover
    from apex_core.pipeline.runner import run_pipeline

    channel = _Channel()
    raw = sys.stdin.buffer.read()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the agents and workers it starts get no stdin of ours
    os.close(devnull)
    try:
        request = ChildRequest.model_validate_json(raw)
    except ValidationError as error:
        channel.send(ErrorLine(message=f"the pipeline child's request is not a ChildRequest: {error.errors()[0]['msg']}"))
        return 2
    watch_parent(request.parent_pid)
    announced: list[Path] = []

    def on_save(state: RunState) -> None:
        if not announced:
            announced.append(state.folder)
            channel.send(StartedLine(run_dir=str(state.folder)))

    try:
        recover()  # what an earlier run killed mid-patch left open, as every apex command does first
        state = run_pipeline(request.config, Path(request.results_root),
                             resume=Path(request.resume) if request.resume else None, only=request.only,
                             progress=lambda fraction, message: channel.send(ProgressLine(fraction=fraction, message=message)),
                             on_save=on_save)
    except ApexUserError as error:
        channel.send(ErrorLine(message=" ".join(str(error).split())))
        return 2
    channel.send(FinishedLine(run_dir=str(state.folder)))
    return 0


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(main())
