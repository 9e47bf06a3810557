"""Claude Code, run headless (``claude -p``) in the workspace, as the optimizing agent.

The agent may read the workspace, write its solution file and call Apex's grading and source
tools over MCP (an absolute-path MCP config of those servers is written beside the transcript).
Its session is read from ``--output-format stream-json``: every tool call with its arguments and
whether it succeeded, the turns, the final message and the cost, kept for the trajectory; whether
it succeeded is decided only by grading the file it wrote.

A session that fails for the host's own reasons (an API or network error, no result at all) is
started again, up to ``HOST_RETRIES`` times, and if it still fails the run says so in
``infra_error``, which the pipeline never counts against the agent. A refused login is the user's
to fix and stops the run. Running past the wall-clock limit is the agent's own failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from apex_core.agents.base import AgentRun, AgentToolCall
from apex_core.errors import AgentUnavailableError
from apex_core.tasks.schema import Task

ALLOWED_TOOLS = "Read Write Edit Glob Grep Bash(apex:*) Bash(python:*) Bash(python3:*) mcp__apex-grader mcp__apex-source"


DISALLOWED_TOOLS = "Read(./reference_solutions/**) Edit(./reference_solutions/**)"
"""Claude Code's deny rules (gitignore-style paths; Read rules also cover Grep and Glob). A
best-effort fence for agents run by ``apex eval``: the OS-level fence is the grader's sandbox user,
which cannot enter the directory at all."""

HOST_RETRIES = 2
RETRY_WAIT_S = (2.0, 10.0)
LOGIN_WORDS = ("invalid api key", "please run /login", "authentication_error", "not logged in", "oauth token")


class ClaudeCodeAgent:
    name = "claude"

    def __init__(self, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, executable: str = "claude",
                 mcp_config: Path | None = None) -> None:
        self.model = model
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.executable = executable
        self.mcp_config = mcp_config

    def command(self, system: str, prompt: str) -> list[str]:
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
        if self.mcp_config is not None:
            argv += ["--mcp-config", str(self.mcp_config), "--strict-mcp-config"]
        if self.model:
            argv += ["--model", self.model]
        return argv

    def preflight(self, task: Task, solution_path: Path) -> None:
        """Refuse before anything is written when the CLI is missing."""
        if shutil.which(self.executable) is None:
            raise AgentUnavailableError(
                "the 'claude' CLI is not on PATH; install it (npm install -g @anthropic-ai/claude-code), "
                "log in, or use --dry-run"
            )

    def _config(self, folder: Path) -> None:
        if self.mcp_config is None:
            from apex_core.hosting.hosts import render_agent_config

            self.mcp_config = folder / "agent_mcp.json"
            self.mcp_config.write_text(render_agent_config(sys.executable), encoding="utf-8")

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        self.preflight(task, solution_path)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        self._config(solution_path.parent)
        transcript = solution_path.parent / "agent_transcript.jsonl"
        before = solution_path.stat().st_mtime_ns if solution_path.exists() else None
        started = time.monotonic()
        attempts, infra_error = 0, ""
        while True:
            attempts += 1
            stdout, stderr, exit_code = self._session(system, prompt, workspace)
            with transcript.open("a", encoding="utf-8") as log:
                log.write(stdout if stdout.endswith("\n") or not stdout else stdout + "\n")
            events = _events(stdout)
            result = next((e for e in reversed(events) if e.get("type") == "result"), None)
            said = f"{json.dumps(result)[:2000] if result else ''} {stderr[-2000:]}".lower()
            if any(word in said for word in LOGIN_WORDS):
                raise AgentUnavailableError("Claude Code is not logged in (or its API key was refused): run 'claude' once "
                                            "to log in, or set ANTHROPIC_API_KEY; or use --agent replay")
            infra_error = _host_failure(result, exit_code, stderr)
            if not infra_error or attempts > HOST_RETRIES:
                break
            time.sleep(RETRY_WAIT_S[min(attempts - 1, len(RETRY_WAIT_S) - 1)])
        after = solution_path.stat().st_mtime_ns if solution_path.exists() else None
        return AgentRun(
            backend=self.name,
            solution_path=str(solution_path),
            wrote_solution=after is not None and after != before,
            elapsed_s=round(time.monotonic() - started, 3),
            exit_code=exit_code,
            transcript_path=str(transcript),
            summary=_summarize(result) or stderr.strip()[-500:],
            turns=result.get("num_turns") if result and isinstance(result.get("num_turns"), int) else None,
            tool_calls=_tool_calls(events),
            attempts=attempts,
            infra_error=infra_error,
        )

    def _session(self, system: str, prompt: str, workspace: Path) -> tuple[str, str, int | None]:
        try:
            done = subprocess.run(self.command(system, prompt), cwd=workspace, capture_output=True, text=True,
                                  timeout=self.timeout_s, env=os.environ.copy(), check=False)
            return done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return stdout, f"timed out after {self.timeout_s:g} s (the agent's time limit)", None


def _events(stdout: str) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _host_failure(result: dict[str, Any] | None, exit_code: int | None, stderr: str) -> str:
    """Why the session failed for the host's reasons, or "" (a timeout is the agent's)."""
    if exit_code is None:
        return ""
    if result is None:
        return f"Claude Code ended (exit {exit_code}) without a result: {(stderr.strip().splitlines() or ['no output'])[-1][:300]}"
    text = str(result.get("result", ""))
    if result.get("is_error") and ("api error" in text.lower() or result.get("subtype") == "error_during_execution"):
        return f"Claude Code's session failed: {text[:300]}"
    return ""


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
