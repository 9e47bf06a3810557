"""Claude Code, run headless (``claude -p``) in the workspace, as the optimizing agent.

The agent may read the workspace and write its solution file; its transcript is kept next to the
solution. Its final message and cost are recorded for the report; whether it succeeded is decided
only by grading the file it wrote. The full agent loop (iterations, reflection, MCP tools) is
the pipeline's; this runs one session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from apex_core.agents.base import AgentRun
from apex_core.errors import AgentUnavailableError
from apex_core.tasks.schema import Task

ALLOWED_TOOLS = "Read Write Edit Glob Grep Bash(apex:*) Bash(python:*) Bash(python3:*)"


DISALLOWED_TOOLS = "Read(./reference_solutions/**) Edit(./reference_solutions/**)"
"""Claude Code's deny rules (gitignore-style paths; Read rules also cover Grep and Glob). A
best-effort fence for agents run by ``apex eval``: the OS-level fence is the grader's sandbox user,
which cannot enter the directory at all."""


class ClaudeCodeAgent:
    name = "claude"

    def __init__(self, model: str | None = None, max_turns: int = 25, timeout_s: float = 1800, executable: str = "claude") -> None:
        self.model = model
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.executable = executable

    def command(self, system: str, prompt: str) -> list[str]:
        argv = [
            self.executable,
            "-p",
            prompt,
            "--append-system-prompt",
            system,
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            ALLOWED_TOOLS,
            # Our reference solutions sit in the same checkout; a graded agent must not read them.
            "--disallowedTools",
            DISALLOWED_TOOLS,
            "--max-turns",
            str(self.max_turns),
        ]
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

    def run(self, task: Task, system: str, prompt: str, workspace: Path, solution_path: Path) -> AgentRun:
        self.preflight(task, solution_path)
        solution_path.parent.mkdir(parents=True, exist_ok=True)
        transcript = solution_path.parent / "agent_transcript.json"
        before = solution_path.stat().st_mtime_ns if solution_path.exists() else None
        started = time.monotonic()
        try:
            done = subprocess.run(
                self.command(system, prompt),
                cwd=workspace,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env=os.environ.copy(),
                check=False,
            )
            stdout, exit_code = done.stdout, done.returncode
            stderr = done.stderr
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            stderr, exit_code = f"timed out after {self.timeout_s:g} s", None
        transcript.write_text(stdout, encoding="utf-8")
        summary = _summarize(stdout) or stderr.strip()[-500:]
        after = solution_path.stat().st_mtime_ns if solution_path.exists() else None
        return AgentRun(
            backend=self.name,
            solution_path=str(solution_path),
            wrote_solution=after is not None and after != before,
            elapsed_s=round(time.monotonic() - started, 3),
            exit_code=exit_code,
            transcript_path=str(transcript),
            summary=summary,
            turns=_turns(stdout),
        )


def _summarize(stdout: str) -> str:
    """The final message, turns and cost from Claude Code's JSON result, when there is one."""
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError:
        return ""
    if not isinstance(result, dict):
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


def _turns(stdout: str) -> int | None:
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError:
        return None
    turns = result.get("num_turns") if isinstance(result, dict) else None
    return turns if isinstance(turns, int) else None
