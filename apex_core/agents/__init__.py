"""Agent backends: what turns a prompt into a solution file.

``DryRunAgent`` writes a known-good solution without any LLM, so the pipeline can run anywhere;
``ClaudeCodeAgent`` runs Claude Code headless. Every backend is judged only by the file it leaves;
its own claims are recorded, never trusted.
"""

from apex_core.agents.base import Agent, AgentRun, make_agent
from apex_core.agents.claude_code import ClaudeCodeAgent
from apex_core.agents.dry_run import DryRunAgent

__all__ = ["Agent", "AgentRun", "ClaudeCodeAgent", "DryRunAgent", "make_agent"]
