"""A child of our own code that imports agent code, confined as the grader confines a candidate.

Why: grading is not the only place a solution runs. Once patched into the stack it runs again in
the in-model check, the accuracy gate and the final benchmark's workers; before this module those
were plain subprocesses with the user's rights, and a solution graded ``ok`` wrote a ``.pth`` into
site-packages, edited another package and reached a local socket from there (issue 28). Every such
child is now started the way a grading worker is: under the reaper (``reaper.py``: resource limits,
a subreaper that kills everything the child leaves behind), inside the sandbox (``sandbox.py``: its
own namespaces, a read-only view of the system and of site-packages, so the patched files are
visible and nothing is writable but its scratch directory; no home, no network), with an
environment built from an allow-list. ``unconfined`` runs it with the user's rights instead, only
when the user asked for it (the caller records that choice).

The child talks to the parent over a private pipe pair passed as two descriptors, never over its
stdout, which the solution shares: a solution that prints a protocol message forges nothing. Each
request carries a fresh nonce that the reply must repeat, so a reply cannot be written ahead of the
request it answers. (Code in the child's own process can still find the descriptors; what the
parent accepts from the child is therefore checked against what it can verify itself: outputs
against its own reference, tokens against a trusted arm, gains against an Amdahl bound.)

The parent side is ``ConfinedChild``; the child side is ``ParentChannel.from_argv``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from apex_core.errors import ApexUserError
from apex_core.grader.isolation import sandbox, wire
from apex_core.grader.isolation.process import (
    default_memory_bytes,
    worker_environment,
    confinement_problem,
)
from apex_core.grader.isolation.scratch import new_scratch

CHANNEL_FLAG = "--apex-channel"
"""How the child is told its two descriptors: ``--apex-channel READ_FD,WRITE_FD`` first on its argv."""
TMP_BYTES = 1024**3
MAX_REPLY_BYTES = 1 << 26
"""Replies are small headers (verdicts, token digests); anything larger is a broken child."""


class ChildFailed(Exception):
    """The child died, hung or broke the protocol; ``kind`` is 'crash', 'timeout', 'forged' or 'infra'."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def require_confinement(what: str, unconfined: bool) -> None:
    """Refuse in one line, before anything runs, to run agent code that cannot be confined here,
    unless the user asked for it (``--unconfined``, which the caller records)."""
    if unconfined:
        return
    problem = confinement_problem()
    if problem:
        raise ApexUserError(f"refusing to {what}: agent code cannot be confined on this machine ({problem}); "
                            "pass --unconfined to run it with your own rights (the result records it)")


class ConfinedChild:
    """``python -m MODULE ARGS`` under the reaper, confined unless ``unconfined``; spoken to over a
    private pipe pair. ``scratch`` is the only directory it can write (its HOME and TMPDIR too):
    put input files there and read output files from there (as data, never as code)."""

    def __init__(self, module: str, args: list[str] = (), *, unconfined: bool = False, memory_bytes: int | None = None,
                 cpu_seconds: int = 24 * 3600, extra_env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.module = module
        self.unconfined = unconfined
        self.scratch = new_scratch()
        self.log_path = self.scratch / "child.log"
        self.identity = None if unconfined else sandbox.candidate_identity()
        if self.identity is not None:
            os.chown(self.scratch, *self.identity)
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        passed = (to_child_r, from_child_w)
        config = {
            "pass_fds": list(passed),
            "scratch": str(self.scratch),
            "memory_bytes": memory_bytes or default_memory_bytes(),
            "cpu_seconds": cpu_seconds,
            "file_bytes": 8 * 1024**3,
            "cpus": None,
            "confine": None if unconfined else {"writable": [], "tmp_bytes": TMP_BYTES},
        }
        argv = [sys.executable, "-s", "-m", module, CHANNEL_FLAG, f"{to_child_r},{from_child_w}", *args]
        environment = worker_environment(self.scratch, extra_env)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-s", "-m", "apex_core.grader.isolation.reaper", json.dumps(config), "--", *argv],
                pass_fds=passed, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=cwd or self.scratch, env=environment, start_new_session=True,
            )
        os.close(to_child_r)
        os.close(from_child_w)
        self._closed = False

    def give(self, path: Path) -> None:
        """Hand a file the parent wrote in ``scratch`` to the child (its owner when confined as root)."""
        if self.identity is not None:
            os.chown(path, *self.identity)

    def request(self, header: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``header`` with a fresh nonce; the reply, which must repeat the nonce."""
        nonce = secrets.token_hex(16)
        try:
            wire.send(self._to_child, {**header, "nonce": nonce})
            reply, _ = wire.receive(self._from_child, timeout_s, None, MAX_REPLY_BYTES)
        except wire.ChannelTimeout:
            self.close()
            raise ChildFailed("timeout", f"no answer to '{header.get('op')}' within {timeout_s:g} s") from None
        except (wire.ChannelClosed, BrokenPipeError, ValueError, OSError):
            code = self._exit_code()
            self.close()
            raise ChildFailed(*self._death(code)) from None
        if reply.get("nonce") != nonce:
            self.close()
            raise ChildFailed("forged", f"a reply to '{header.get('op')}' did not carry this request's nonce")
        reply.pop("nonce", None)
        return reply

    def _exit_code(self) -> int | None:
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def _death(self, code: int | None) -> tuple[str, str]:
        from apex_core.grader.isolation.reaper import MEMORY_EXCEEDED_EXIT, SANDBOX_FAILED_EXIT

        tail = self.log_tail(400)
        if code == SANDBOX_FAILED_EXIT:
            return "infra", f"the child could not be started confined: {tail}"
        if code == MEMORY_EXCEEDED_EXIT:
            return "crash", "it exceeded its memory limit"
        name = self.module.rsplit(".", 1)[-1]
        if code is None:
            what = f"the {name} process stopped answering"
        elif code > 128:
            what = f"the {name} process crashed (killed by signal {code - 128})"
        else:
            what = f"the {name} process ended (exit code {code})"
        return "crash", what + (f": {tail}" if tail else "")

    def log_tail(self, limit: int = 1500) -> str:
        """The end of what the child printed: shown to a person as a failure's context, never parsed."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-limit:]

    def close(self) -> None:
        """Kill the child and everything it started; remove its scratch directory."""
        if self._closed:
            return
        self._closed = True
        from apex_core.grader.isolation.reaper import kill_below

        if self.process.poll() is None:
            kill_below(self.process.pid)
            try:
                self.process.terminate()
                self.process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
                self.process.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> ConfinedChild:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class ParentChannel:
    """The child's end: requests from the parent, replies to it (each repeating its nonce)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self._nonce: str | None = None

    @classmethod
    def from_argv(cls, argv: list[str]) -> tuple[ParentChannel, list[str]]:
        """The channel named first on ``argv`` (``--apex-channel R,W``) and the arguments after it."""
        if len(argv) < 2 or argv[0] != CHANNEL_FLAG:
            raise SystemExit(f"usage: python -m MODULE {CHANNEL_FLAG} READ_FD,WRITE_FD ARGS... (started by ConfinedChild)")
        read_fd, write_fd = (int(fd) for fd in argv[1].split(","))
        return cls(read_fd, write_fd), argv[2:]

    def receive(self) -> dict[str, Any] | None:
        """The next request, or None when the parent has gone."""
        try:
            header, _ = wire.receive(self.read_fd)
        except (wire.ChannelClosed, OSError):
            return None
        self._nonce = header.pop("nonce", None)
        return header

    def reply(self, header: dict[str, Any]) -> None:
        wire.send(self.write_fd, {**header, "nonce": self._nonce})
