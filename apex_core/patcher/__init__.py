"""The patcher: hot-patching winners into the installed stack, crash-safe (issue 17).

``Patcher`` changes files of this environment's site-packages under a write-ahead journal;
``recover`` (every apex command runs it first) undoes what a killed run left open; ``restore``
undoes everything; ``status`` says what is patched. docs/patching.md explains the guarantees.
"""

from apex_core.patcher.patcher import Patcher, RestoreError, RestoreReport, recover, restore, status

__all__ = ["Patcher", "RestoreError", "RestoreReport", "recover", "restore", "status"]
