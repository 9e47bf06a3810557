"""The agent backends by name: the one place that imports them all (each imports ``base``, so
the choice cannot live there without a cycle)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from apex_core.agents.base import Agent
from apex_core.errors import UnknownNameError

AgentName = Literal["replay", "claude", "codex", "cursor"]
"""The backends a pipeline run can use (``apex run --agent``, ``run_pipeline``'s agent)."""
BACKENDS: tuple[str, ...] = ("dry-run", *get_args(AgentName))
"""Every backend ``make_agent`` makes: the pipeline's, and the dry run ``apex agent run`` offers."""


def make_agent(
    name: str, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, overwrite: bool = False,
    replay_from: Path | None = None,
) -> Agent:
    """The backend ``name``; ``overwrite``: the dry run may replace a solution file that differs from its own;
    ``replay_from``: the replay agent's recorded trajectories (default: our own solutions)."""
    from apex_core.agents.claude_code import ClaudeCodeAgent
    from apex_core.agents.dry_run import DryRunAgent
    from apex_core.agents.replay import ReplayAgent

    if name == "dry-run":
        return DryRunAgent(overwrite=overwrite)
    if name == "replay":
        return ReplayAgent(replay_from)
    if name == "claude":
        return ClaudeCodeAgent(model=model, max_turns=max_turns, timeout_s=timeout_s)
    if name == "codex":
        from apex_core.agents.codex import CodexAgent

        return CodexAgent(model=model, max_turns=max_turns, timeout_s=timeout_s)
    if name == "cursor":
        from apex_core.agents.cursor import CursorAgent

        return CursorAgent(model=model, max_turns=max_turns, timeout_s=timeout_s)
    raise UnknownNameError("agent backend", name, BACKENDS)
