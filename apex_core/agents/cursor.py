"""Cursor's CLI agent, run headless (``agent -p --output-format stream-json``), as the optimizing agent.

Cursor reads MCP servers from ``~/.cursor/mcp.json`` and the project's ``.cursor/mcp.json``:
the session's private home gets one with Apex's grading and source servers (absolute paths), or,
unconfined, the workspace does; ``--approve-mcps`` lets print mode use them and ``--force`` lets it
run commands and write the solution without an approval prompt. ``--force`` lets every command
through: the session runs confined (``apex_core.agents.confine``). Cursor has no turn limit: the
prompt states it and the wall-clock limit enforces time; the turns recorded are its completed
tool calls and messages.

UNVERIFIED AGAINST A REAL CURSOR: the CLI is not on npm and cannot be installed here. The command
follows Cursor's CLI documentation (``-p``, ``--output-format stream-json``, ``--force``,
``--approve-mcps``, ``--workspace``, ``--model``; auth through ``CURSOR_API_KEY``) and the events
its documentation and public stream analyses describe (``system``/``init``, ``user``,
``assistant``, ``tool_call`` ``started``/``completed`` with one ``<kind>ToolCall`` holding
``args`` and a ``result`` of ``success`` or ``error``, and a final ``result``); the parser is
tested on an event stream built from those descriptions.
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


class CursorAgent:
    name = "cursor"

    def __init__(self, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, executable: str | None = None) -> None:
        self.model = model
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.executable = executable or shutil.which("agent") or shutil.which("cursor-agent") or "agent"

    def command(self, system: str, prompt: str, workspace: Path) -> list[str]:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--force", "--approve-mcps",
                "--workspace", str(workspace)]
        if self.model:
            argv += ["--model", self.model]
        return [*argv, headless.one_prompt(system, prompt, f"{self.max_turns} tool calls")]

    def preflight(self, task: Task, solution_path: Path) -> None:
        self.available()

    def available(self) -> None:
        """The CLI is on PATH and its session can be confined (else one line saying what to do)."""
        if shutil.which(self.executable) is None:
            raise AgentUnavailableError("Cursor's CLI agent ('agent' or 'cursor-agent') is not on PATH; install it "
                                        "(curl https://cursor.com/install -fsS | bash), set CURSOR_API_KEY, or use --agent replay")
        confine.require()

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        self.preflight(task, solution_path)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.command(system, prompt, workspace)
        return headless.run_agent(
            self.name, lambda: self._session(argv, workspace, solution_path), read_session, solution_path,
            solution_path.parent / "agent_transcript.jsonl",
            "Cursor's agent is not logged in: run 'agent login' or set CURSOR_API_KEY; or use --agent replay")


    def _session(self, argv: list[str], workspace: Path, solution_path: Path) -> headless.Session:
        from apex_core.hosting.hosts import render_agent_config

        with confine.Session(self.name, [solution_path.parent]) as session:
            config = (session.home if session.confined else workspace) / ".cursor" / "mcp.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(render_agent_config(sys.executable), encoding="utf-8")
            return headless.run_session(session.command(argv, workspace), workspace, self.timeout_s, session.env)


def read_session(session: headless.Session) -> headless.Reading:
    result = next((e for e in reversed(session.events) if e.get("type") == "result"), None)
    completed = [e for e in session.events if e.get("type") == "tool_call" and e.get("subtype") == "completed"]
    messages = [e for e in session.events if e.get("type") == "assistant"]
    said = f"{json.dumps(result)[:2000] if result else ''} {session.stderr[-2000:]}"
    failure = ""
    if session.exit_code is not None:
        if result is None:
            failure = f"Cursor's agent ended (exit {session.exit_code}) without a result: {headless.last_line(session.stderr)}"
        elif result.get("is_error") and headless.transient(str(result.get("result", ""))):
            failure = f"Cursor's session failed: {str(result.get('result', ''))[:300]}"
    elif not completed and not messages and headless.transient(session.stderr):
        failure = f"Cursor's agent never reached its model before the time limit: {headless.last_line(session.stderr)}"
    summary = "; ".join(filter(None, [
        f"{len(completed)} tool calls",
        f"{result.get('duration_ms', 0) / 1000:.1f} s" if result and isinstance(result.get("duration_ms"), (int, float)) else "",
        str(result.get("result", ""))[:400] if result else ""]))
    return headless.Reading(tool_calls=[_tool_call(e) for e in completed], turns=(len(completed) + len(messages)) or None,
                            summary=summary, host_failure=failure,
                            login_refused=headless.says_login_refused(said) and bool(failure or (result or {}).get("is_error")))


def _tool_call(event: dict[str, Any]) -> AgentToolCall:
    call = event.get("tool_call") or {}
    kind, body = next(iter(call.items())) if isinstance(call, dict) and call else ("unknown", {})
    body = body if isinstance(body, dict) else {}
    name = kind[: -len("ToolCall")] if kind.endswith("ToolCall") else kind
    if kind == "mcpToolCall" or kind == "function":
        args = body.get("args") or {}
        name = str(args.get("toolName") or args.get("name") or body.get("name") or name)
    outcome = body.get("result") or {}
    error = outcome.get("error") if isinstance(outcome, dict) else None
    shown = json.dumps(error if error is not None else outcome.get("success") if isinstance(outcome, dict) else outcome)
    arguments = body.get("args") if "args" in body else body.get("arguments")
    return AgentToolCall(name=name, arguments=json.dumps(arguments)[:500],
                         ok=None if not outcome else error is None and "rejected" not in outcome, result=shown[:300])
