"""A scripted stand-in for a model behind Anthropic's Messages API or OpenAI's Responses API:
offline, deterministic host runs.

Claude Code (Messages API) or Codex (Responses API) pointed at ``ScriptedModelServer`` runs
headless exactly as it would against a real model, tool calls and MCP servers included, while the
"model" replays a script file (``scripts/*.yaml``) and records every request it receives. Tests
use it to prove the whole path host -> MCP -> grader -> host offline; demos and regression runs
use the same scripts through ``python -m scripted_model``.
"""

from scripted_model.script import Match, Script, Turn, load_script, render_text
from scripted_model.server import RecordedRequest, ScriptedModelServer

__all__ = ["Match", "RecordedRequest", "Script", "ScriptedModelServer", "Turn", "load_script", "render_text"]
