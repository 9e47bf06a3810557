"""OpenAI Codex, run headless (``codex exec --json``) in the workspace, as the optimizing agent.

Codex gets the system prompt ahead of the task prompt (``exec`` has no separate one), Apex's
grading and source servers through ``-c mcp_servers.*`` overrides with their tools' timeouts
(Codex cuts MCP calls at 60 s otherwise), its own sandbox letting its commands write only the
workspace, and no approval prompts. Codex's sandbox lets commands read every file; the session
runs confined (``apex_core.agents.confine``), which holds for reads too and for whatever Codex
runs outside its sandbox (its MCP servers). It has no turn limit of its own: the prompt states the limit, the wall-clock
limit enforces time, and the turns recorded are the model's actions (commands, file changes, MCP
calls, messages) read from its JSON events. The solution file is never deleted between attempts.

Written against Codex's documented ``exec --json`` events (``thread.started``, ``turn.completed``
with usage, ``turn.failed``, ``item.completed`` with ``agent_message``, ``command_execution``,
``file_change``, ``mcp_tool_call``, ``error``); tested on recorded event streams, and in CI against
the scripted model. The model endpoint is the user's Codex configuration (``model_provider`` in
``$CODEX_HOME/config.toml``, a custom provider included); Apex sets only ``--model``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from apex_core.agents import confine, headless
from apex_core.agents.base import AgentRun, AgentToolCall
from apex_core.errors import AgentUnavailableError
from apex_core.tasks.schema import Task

ACTIONS = ("command_execution", "file_change", "mcp_tool_call", "agent_message", "web_search")


def _toml(value: object) -> str:
    return json.dumps(value)  # JSON strings, numbers and arrays are valid TOML values


def mcp_overrides(python: str) -> list[str]:
    """Apex's agent servers as ``-c`` overrides, and how long Codex waits for them to start before
    its first request: without that wait ``exec`` asks the model at once, and a server that imports
    torch (the grader) is never offered to it (seen with codex 0.171.0: no Apex tool in any request)."""
    from apex_core.hosting.hosts import AGENT_SERVERS
    from apex_core.hosting.mcp_registry import SERVERS

    servers = [s for s in SERVERS if s.name in AGENT_SERVERS]
    argv: list[str] = ["-c", f"mcp_optional_startup_grace_ms={max(s.startup_timeout_s for s in servers) * 1000}"]
    for server in servers:
        key = f"mcp_servers.{server.name}"
        settings = {"command": python, "args": ["-m", server.module], "startup_timeout_sec": server.startup_timeout_s,
                    "tool_timeout_sec": server.tool_timeout_s}
        if server.pass_env:
            settings["env_vars"] = list(server.pass_env)
        for name, value in settings.items():
            argv += ["-c", f"{key}.{name}={_toml(value)}"]
    return argv


class CodexAgent:
    name = "codex"

    def __init__(self, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, executable: str = "codex") -> None:
        self.model = model
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.executable = executable

    def command(self, system: str, prompt: str, workspace: Path) -> list[str]:
        argv = [self.executable, "exec", "--json", "--color", "never", "--skip-git-repo-check", "--cd", str(workspace),
                "--sandbox", "workspace-write", "-c", 'approval_policy="never"', *mcp_overrides(sys.executable)]
        if self.model:
            argv += ["--model", self.model]
        return [*argv, headless.one_prompt(system, prompt, f"{self.max_turns} actions (commands, edits and tool calls)")]

    def preflight(self, task: Task, solution_path: Path) -> None:
        self.available()

    def available(self) -> None:
        """The CLI is on PATH and its session can be confined (else one line saying what to do)."""
        if shutil.which(self.executable) is None:
            raise AgentUnavailableError("the 'codex' CLI is not on PATH; install it (npm install -g @openai/codex), log in "
                                        "(codex login), or use --agent replay")
        confine.require()

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        self.preflight(task, solution_path)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.command(system, prompt, workspace)
        return headless.run_agent(
            self.name, lambda: self._session(argv, workspace, solution_path), read_session, solution_path,
            solution_path.parent / "agent_transcript.jsonl",
            "Codex is not logged in (or its API key was refused): run 'codex login', or set OPENAI_API_KEY; or use --agent replay")


    def _session(self, argv: list[str], workspace: Path, solution_path: Path) -> headless.Session:
        with confine.Session(self.name, [solution_path.parent]) as session:
            return headless.run_session(session.command(argv, workspace), workspace, self.timeout_s, session.env)


def read_session(session: headless.Session) -> headless.Reading:
    items = [e["item"] for e in session.events if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)]
    failures = [str((e.get("error") or {}).get("message", "")) for e in session.events if e.get("type") == "turn.failed"]
    failures += [str(e.get("message", "")) for e in session.events if e.get("type") == "error"]
    completed = any(e.get("type") == "turn.completed" for e in session.events)
    said = " ".join(failures) + " " + session.stderr[-2000:]
    acted = any(i.get("type") in ACTIONS for i in items)
    failure = ""
    if session.exit_code is None and not acted and failures and all(headless.transient(f) for f in failures):
        # Codex waits for the network without end: a session that never reached its model is the host's failure.
        failure = f"Codex never reached its model before the time limit: {failures[-1][:300]}"
    elif session.exit_code is not None and not completed:
        failure = (f"Codex's turn failed: {failures[-1][:300]}" if failures and headless.transient(failures[-1]) else
                   f"Codex ended (exit {session.exit_code}) without completing its turn: "
                   f"{failures[-1][:300] if failures else headless.last_line(session.stderr)}")
    messages = [str(i.get("text", "")) for i in items if i.get("type") == "agent_message"]
    usage = next((e.get("usage") for e in reversed(session.events) if e.get("type") == "turn.completed"), None) or {}
    summary = "; ".join(filter(None, [
        f"{sum(1 for i in items if i.get('type') in ACTIONS)} actions",
        f"{usage.get('input_tokens', 0)} input and {usage.get('output_tokens', 0)} output tokens" if usage else "",
        messages[-1][:400] if messages else ""]))
    return headless.Reading(tool_calls=[c for c in map(_tool_call, items) if c is not None],
                            turns=sum(1 for i in items if i.get("type") in ACTIONS) or None, summary=summary,
                            host_failure=failure, login_refused=bool(failure) and headless.says_login_refused(said))


def _tool_call(item: dict[str, Any]) -> AgentToolCall | None:
    kind = item.get("type")
    if kind == "command_execution":
        return AgentToolCall(name="shell", arguments=json.dumps(item.get("command", ""))[:500],
                             ok=item.get("status") == "completed" and item.get("exit_code") == 0,
                             result=str(item.get("aggregated_output", ""))[:300])
    if kind == "file_change":
        changes = [f"{c.get('kind')} {c.get('path')}" for c in item.get("changes") or [] if isinstance(c, dict)]
        return AgentToolCall(name="apply_patch", arguments=json.dumps(changes)[:500], ok=item.get("status") == "completed")
    if kind == "mcp_tool_call":
        result = item.get("result") or {}
        error = (item.get("error") or {}).get("message", "")
        shown = error or json.dumps(result.get("structured_content") or result.get("content") or "")
        return AgentToolCall(name=f"{item.get('server')}.{item.get('tool')}", arguments=json.dumps(item.get("arguments"))[:500],
                             ok=item.get("status") == "completed" and not error, result=shown[:300])
    if kind == "web_search":
        return AgentToolCall(name="web_search", arguments=json.dumps(item.get("query", ""))[:500], ok=True)
    return None
