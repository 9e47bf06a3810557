"""What the headless agent backends (Claude Code, Codex, Cursor) share: one session of a CLI in the
workspace under a wall-clock limit, its JSON-lines output, the transcript kept, and sessions that
failed for the host's own reasons started again.

A backend says how to read its events: the tool calls, the turns, the final message, and whether
a failed session was the host's fault (an API or network error, no result at all: retried, and
never counted against the agent) or a refused login (the user's to fix: the run stops). Running
past the wall-clock limit is the agent's own failure and is not retried.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apex_core.agents.base import AgentRun, AgentToolCall
from apex_core.errors import AgentUnavailableError

HOST_RETRIES = 2
RETRY_WAIT_S: tuple[float, ...] = (2.0, 10.0)


@dataclass
class Session:
    stdout: str
    stderr: str
    exit_code: int | None
    """None when the wall-clock limit ended it."""
    events: list[dict[str, Any]] = field(default_factory=list)


def json_lines(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def run_session(argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> Session:
    """Run one session of a host to its end or its time limit.

    At the limit the host is sent SIGTERM and given ``STOP_GRACE_S`` before SIGKILL: a confined
    session's launcher (``confine``) then ends the session's namespace and exits only once every
    process of it is gone, so that nothing of the agent still runs when its folder is read.
    """
    # No stdin: the prompt is on the command line, and a host reading more from stdin (codex exec
    # does when it is not a terminal) would wait forever, or, under the apex-pipeline MCP server,
    # take bytes of the MCP session.
    with subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env if env is not None else os.environ.copy()) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            return Session(stdout, stderr, process.returncode, json_lines(stdout))
        except subprocess.TimeoutExpired as expired:
            partial = expired.stdout
        process.terminate()
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    stdout = partial.decode(errors="replace") if isinstance(partial, bytes) else (partial or "")
    return Session(stdout, f"timed out after {timeout_s:g} s (the agent's time limit)", None, json_lines(stdout))


STOP_GRACE_S = 30.0
"""How long a host past its time limit has to end after SIGTERM before it is killed."""


@dataclass
class Reading:
    """A backend's account of one session."""

    tool_calls: list[AgentToolCall]
    turns: int | None
    summary: str
    host_failure: str = ""
    """Why the session failed for the host's own reasons, or ""."""
    login_refused: bool = False


def run_agent(backend: str, start: Callable[[], Session], read: Callable[[Session], Reading], solution_path: Path,
              transcript: Path, login_hint: str) -> AgentRun:
    """Run sessions until one does not fail for the host's reasons (at most 1 + HOST_RETRIES)."""
    before = solution_path.stat().st_mtime_ns if solution_path.exists() else None
    started = time.monotonic()
    attempts = 0
    removed: list[str] = []
    while True:
        attempts += 1
        session = start()
        removed += clear_links(solution_path.parent)
        append_transcript(transcript, session.stdout if session.stdout.endswith("\n") or not session.stdout else session.stdout + "\n")
        reading = read(session)
        if reading.login_refused:
            raise AgentUnavailableError(login_hint)
        if not reading.host_failure or attempts > HOST_RETRIES:
            break
        time.sleep(RETRY_WAIT_S[min(attempts - 1, len(RETRY_WAIT_S) - 1)])
    after = solution_path.stat().st_mtime_ns if solution_path.exists() else None
    summary = reading.summary or session.stderr.strip()[-500:]
    if removed:
        summary += f"; removed what the agent left in its folder that was not a file: {', '.join(removed[:8])}"
    return AgentRun(backend=backend, solution_path=str(solution_path), wrote_solution=after is not None and after != before,
                    elapsed_s=round(time.monotonic() - started, 3), exit_code=session.exit_code,
                    transcript_path=str(transcript), summary=summary,
                    turns=reading.turns, tool_calls=reading.tool_calls, attempts=attempts, infra_error=reading.host_failure)


def clear_links(folder: Path) -> list[str]:
    """Remove every link, FIFO, socket or device the agent left in its writable ``folder`` (and the
    folders below it); the names removed, relative to ``folder``.

    Why: what Apex does next with that folder runs with the user's rights, outside the session: it
    grades and keeps ``solution.py`` and writes its gradings and copies there. A ``solution.py``
    linked to a reference solution would be graded as the agent's own, and a ``grade_iter2.json``
    linked to ``~/.bashrc`` would have Apex overwrite it. No process of a confined session is left
    when its host exits (its PID namespace ends), so nothing can put a link back afterwards.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            removed += [f"{entry.name}/{name}" for name in clear_links(Path(entry.path))]
        elif not entry.is_file(follow_symlinks=False):
            target = f" -> {os.readlink(entry.path)}" if entry.is_symlink() else ""
            os.unlink(entry.path)
            removed.append(entry.name + target)
    return removed


def append_transcript(path: Path, text: str) -> None:
    """Append ``text`` to the transcript in the agent's writable folder, never through what the
    agent may have left at its name: a link (we would append its words to a file of the user's) or
    a FIFO (we would wait for ever) is removed first."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for attempt in range(2):
        try:
            handle = os.open(path, flags, 0o644)
        except OSError:
            handle = None
        if handle is not None:
            if stat.S_ISREG(os.fstat(handle).st_mode):
                with os.fdopen(handle, "w", encoding="utf-8") as log:
                    log.write(text)
                return
            os.close(handle)
        if attempt == 0:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    raise OSError(f"cannot write the agent's transcript at {path}")


def one_prompt(system: str, prompt: str, limit: str) -> str:
    """The system prompt, the turn limit and the task prompt as one, for hosts without a system
    prompt or a turn limit of their own (Codex, Cursor): the limit is stated, time is enforced."""
    return f"{system}\n\nFinish within {limit}; stop once your solution is graded.\n\n{prompt}"


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def says_login_refused(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in ("invalid api key", "please run /login", "authentication_error", "not logged in",
                                            "401 unauthorized", "status 401", "login required", "please log in",
                                            "authentication required", "agent login"))


TRANSIENT = ("api error", "connection", "stream disconnected", "reconnecting", "waiting for network", "rate limit", "overloaded",
             " 500", " 502", " 503", " 529", "internal server error", "econnreset")
"""Words of an error the host, not the agent, caused; such a session is started again."""


def transient(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in TRANSIENT)
