"""Fault injection for the crash tests: ``APEX_PATCH_FAULT=<point>`` kills this process with
SIGKILL when the patcher reaches that point, exactly as a kill -9 or a power cut would stop it
there. Unset (always, outside the tests), every point is a no-op."""

from __future__ import annotations

import os
import signal

FAULT_ENV = "APEX_PATCH_FAULT"
POINTS = (
    "apply:after-lock",
    "apply:after-backup",
    "apply:after-journal",
    "apply:before-rename",
    "apply:after-rename",
    "apply:after-bytecode",
    "apply:after-all",
    "restore:before-file",
    "restore:before-rename",
    "restore:after-file",
    "restore:before-cleanup",
)
"""Every place the patcher can be killed, in the order it passes them."""


def fault_point(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
