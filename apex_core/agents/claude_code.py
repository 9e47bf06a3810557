"""Claude Code, run headless (``claude -p``) in the workspace, as the optimizing agent.

The agent may read, write its solution file, run ``apex`` commands and call Apex's grading and
source tools over MCP (an absolute-path MCP config of those servers, written into the session's
private home). Its session runs confined (``apex_core.agents.confine``): whatever Claude Code
lets through, it writes only its solution's folder and never sees the reference solutions or a
home folder. Claude Code's own rules are the first fence: no ``Bash`` beyond ``apex`` (the
grader's tools run solutions confined; ``Bash(python:*)`` gave the agent arbitrary code of its
own), and deny rules on the reference solutions by absolute path.
Its session is read from ``--output-format stream-json``: every tool call with its arguments and
whether it succeeded, the turns, the final message and the cost, kept for the trajectory; whether
it succeeded is decided only by grading the file it wrote. Retries and login refusals:
``apex_core.agents.headless``.
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
from apex_core.tasks.reference_solutions import REFERENCE_SOLUTIONS_DIR
from apex_core.tasks.schema import Task

ALLOWED_TOOLS = "Read Write Edit Glob Grep Bash(apex:*) mcp__apex-grader mcp__apex-source"


def _absolute_rule(tool: str, folder: Path) -> str:
    """A rule on everything below ``folder``: ``//`` starts an absolute path in Claude Code's
    rules (``/`` alone is relative to the settings file, ``./`` to the working folder)."""
    return f"{tool}(/{folder.resolve().as_posix()}/**)"


DISALLOWED_TOOLS = " ".join(_absolute_rule(tool, REFERENCE_SOLUTIONS_DIR) for tool in ("Read", "Edit"))
"""Claude Code's deny rules (gitignore-style paths; Read rules also cover Grep and Glob): the
reference solutions wherever the agent's working folder is. The fence that holds is the session's
view (``confine``), where the folder does not exist."""


class ClaudeCodeAgent:
    name = "claude"

    def __init__(self, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, executable: str = "claude",
                 mcp_config: Path | None = None) -> None:
        self.model = model
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.executable = executable
        self.mcp_config = mcp_config

    def command(self, system: str, prompt: str, mcp_config: Path | None = None) -> list[str]:
        """The host's command line; ``mcp_config``: the MCP config to pass (default: the one given
        to the constructor, if any)."""
        mcp_config = mcp_config or self.mcp_config
        argv = [
            self.executable, "-p", prompt,
            "--append-system-prompt", system,
            "--output-format", "stream-json", "--verbose",
            "--permission-mode", "acceptEdits",
            "--allowedTools", ALLOWED_TOOLS,
            # Our reference solutions sit in the same checkout; a graded agent must not read them.
            "--disallowedTools", DISALLOWED_TOOLS,
            "--max-turns", str(self.max_turns),
        ]
        if mcp_config is not None:
            argv += ["--mcp-config", str(mcp_config), "--strict-mcp-config"]
        if self.model:
            argv += ["--model", self.model]
        return argv

    def preflight(self, task: Task, solution_path: Path) -> None:
        """Refuse before anything is written when the CLI is missing or its session cannot be confined."""
        self.available()

    def available(self) -> None:
        """The CLI is on PATH and its session can be confined (else one line saying what to do)."""
        if shutil.which(self.executable) is None:
            raise AgentUnavailableError(
                "the 'claude' CLI is not on PATH; install it (npm install -g @anthropic-ai/claude-code), "
                "log in, or use --agent replay (apex run) or --dry-run (apex eval)"
            )
        confine.require()

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        self.preflight(task, solution_path)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        return headless.run_agent(
            self.name, lambda: self._session(system, prompt, workspace, solution_path), read_session,
            solution_path, solution_path.parent / "agent_transcript.jsonl",
            "Claude Code is not logged in (or its API key was refused): run 'claude' once to log in, or set "
            "ANTHROPIC_API_KEY; or use --agent replay")


    def _session(self, system: str, prompt: str, workspace: Path, solution_path: Path) -> headless.Session:
        """One confined session; its MCP config lives in the session's home, out of the agent's
        reach between sessions (a config in the workspace could be rewritten for the next one)."""
        from apex_core.hosting.hosts import claude_timeouts, render_agent_config

        with confine.Session(self.name, [solution_path.parent]) as session:
            config = session.home / "agent_mcp.json"
            given = self.mcp_config.read_text(encoding="utf-8") if self.mcp_config is not None else None
            config.write_text(given or render_agent_config(sys.executable), encoding="utf-8")
            argv = self.command(system, prompt, config)
            env = {**session.env, **claude_timeouts(environ=session.env)}
            return headless.run_session(session.command(argv, workspace), workspace, self.timeout_s, env)


def read_session(session: headless.Session) -> headless.Reading:
    result = next((e for e in reversed(session.events) if e.get("type") == "result"), None)
    said = f"{json.dumps(result)[:2000] if result else ''} {session.stderr[-2000:]}"
    failure = ""
    if session.exit_code is not None:
        if result is None:
            failure = f"Claude Code ended (exit {session.exit_code}) without a result: {headless.last_line(session.stderr)}"
        elif result.get("is_error") and (result.get("subtype") == "error_during_execution"
                                         or headless.transient(str(result.get("result", "")))):
            failure = f"Claude Code's session failed: {str(result.get('result', ''))[:300]}"
    turns = result.get("num_turns") if result and isinstance(result.get("num_turns"), int) else None
    return headless.Reading(tool_calls=_tool_calls(session.events), turns=turns, summary=_summarize(result),
                            host_failure=failure, login_refused=headless.says_login_refused(said) and bool(failure or
                                                                                                     (result or {}).get("is_error")))


def _tool_calls(events: list[dict[str, Any]]) -> list[AgentToolCall]:
    """Each tool_use of the assistant, matched with its tool_result."""
    results = {}
    for event in events:
        if event.get("type") == "user":
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results[block.get("tool_use_id")] = block
    calls = []
    for event in events:
        if event.get("type") != "assistant":
            continue
        for block in (event.get("message") or {}).get("content") or []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            answer = results.get(block.get("id"))
            content = answer.get("content") if answer else None
            text = content if isinstance(content, str) else json.dumps(content) if content is not None else ""
            calls.append(AgentToolCall(name=str(block.get("name")), arguments=json.dumps(block.get("input"))[:500],
                                       ok=None if answer is None else not answer.get("is_error", False), result=text[:300]))
    return calls


def _summarize(result: dict[str, Any] | None) -> str:
    """The final message, turns and cost from Claude Code's result event, when there is one."""
    if not result:
        return ""
    parts = []
    if result.get("is_error"):
        parts.append("the agent reported an error")
    if "num_turns" in result:
        parts.append(f"{result['num_turns']} turns")
    if "total_cost_usd" in result:
        parts.append(f"${result['total_cost_usd']:.4f}")
    message = str(result.get("result", "")).strip()
    if message:
        parts.append(message[:400])
    return "; ".join(parts)
