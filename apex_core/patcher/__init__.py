"""The patcher: hot-patching winners into the installed stack, crash-safe (issues 17 and 28).

``Patcher`` changes files of this environment's site-packages under a write-ahead journal, inside
a session whose snapshot of the whole environment restore returns to; ``recover`` (every apex
command runs it first) undoes what a killed run left; ``restore`` undoes everything, whoever
changed it; ``status`` says what is patched and ``environment_status`` everything that differs.
docs/patching.md explains the guarantees.
"""

from apex_core.patcher.patcher import (
    EnvironmentStatus,
    Patcher,
    RecoveryError,
    RestoreError,
    RestoreReport,
    environment_status,
    recover,
    restore,
    status,
)

__all__ = ["EnvironmentStatus", "Patcher", "RecoveryError", "RestoreError", "RestoreReport", "environment_status", "recover",
           "restore", "status"]
