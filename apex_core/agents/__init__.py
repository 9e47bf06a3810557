"""Agent backends: what turns a prompt into a solution file.

``DryRunAgent`` writes a known-good solution without any LLM, so the pipeline can run anywhere;
``ClaudeCodeAgent`` runs Claude Code headless. Every backend is judged only by the file it leaves;
its own claims are recorded, never trusted.

The names are imported when first asked for: ``python -m apex_core.agents.confine``, the launcher
of every confined session, must not pay for importing the backends (and the task catalogue
behind them) each time it starts.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"Agent": "base", "AgentRun": "base", "make_agent": "registry", "ClaudeCodeAgent": "claude_code",
            "DryRunAgent": "dry_run"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'apex_core.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(f"apex_core.agents.{_EXPORTS[name]}"), name)
