"""Magpie's failures as one-line errors, and the names of roles, methods and failure kinds."""

from __future__ import annotations

from typing import Literal

from apex_core.errors import ApexUserError

Role = Literal["baseline", "solution"]
LatencyMethod = Literal["cuda_graph", "kernel_trace", "both"]
StageState = Literal["SUCCESS", "FAILED", "SKIPPED"]
ErrorKind = Literal["timeout", "crash", "missing_report", "malformed_report", "compile_failed", "run_failed", "no_latency"]
KNOWN_LATENCY_METHODS = ("auto", "cuda_graph", "kernel_trace", "rocprof_timestamps", "both", "none")


class MagpieNotInstalledError(ApexUserError):
    """``--backend magpie`` was asked for, but MAGPIE_ROOT names no usable Magpie."""


class MagpieError(Exception):
    """Magpie could not produce a usable timing; the message is one line.

    ``kind``: timeout, crash, missing_report, malformed_report, compile_failed, run_failed or
    no_latency. ``role``: the kernel the failure belongs to ('baseline' or 'solution'), or None
    when it cannot be attributed.
    """

    def __init__(self, kind: ErrorKind, message: str, role: Role | None = None) -> None:
        super().__init__(one_line(message, 600))
        self.kind = kind
        self.role = role

    @property
    def outcome(self) -> str:
        """The judge's outcome this suggests: only the solution's own failures are blamed on it."""
        if self.kind == "timeout":
            return "timeout"
        if self.role == "solution" and self.kind == "compile_failed":
            return "compile_error"
        if self.role == "solution" and self.kind == "run_failed":
            return "runtime_error"
        return "infra_error"


def one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 4] + " ..."
