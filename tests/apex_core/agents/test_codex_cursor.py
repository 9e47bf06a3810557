"""The Codex and Cursor backends: their command lines, and their event streams read into tool
calls, turns, a summary, and the difference between the host failing (retried, never the agent's
fault), a refused login (the user's to fix) and the agent's own work. Codex's network failure is
a stream recorded from codex 0.171.0 here; the successful streams are built from the documented
event types (a real Codex session against the scripted model is in tests/conformance)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from apex_core.agents import codex, cursor, headless, make_agent
from apex_core.agents.codex import CodexAgent
from apex_core.agents.cursor import CursorAgent

DATA = Path(__file__).with_name("data")


def _session(events: list[dict], exit_code: int | None = 0, stderr: str = "") -> headless.Session:
    text = "".join(json.dumps(e) + "\n" for e in events)
    return headless.Session(text, stderr, exit_code, headless.json_lines(text))


def test_codex_runs_sandboxed_in_its_workspace_with_the_agent_servers_and_their_timeouts(tmp_path):
    argv = CodexAgent(model="gpt-test", max_turns=9).command("SYSTEM", "PROMPT", tmp_path)
    assert argv[:3] == ["codex", "exec", "--json"] and argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[argv.index("--cd") + 1] == str(tmp_path) and argv[argv.index("--model") + 1] == "gpt-test"
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert 'approval_policy="never"' in overrides
    assert 'mcp_servers.apex-grader.args=["-m", "servers.grader"]' in overrides
    assert any(o.startswith("mcp_servers.apex-grader.tool_timeout_sec=") and int(o.split("=")[1]) > 60 for o in overrides)
    assert not any("apex-patcher" in o or "apex-pipeline" in o for o in overrides)
    assert argv[-1].startswith("SYSTEM") and argv[-1].endswith("PROMPT") and "within 9 actions" in argv[-1]


def test_a_codex_session_reads_into_tool_calls_turns_and_usage():
    events = [
        {"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "plan"}},
        {"type": "item.completed", "item": {"id": "i1", "type": "file_change", "status": "completed",
                                            "changes": [{"path": "solution.py", "kind": "add"}]}},
        {"type": "item.completed", "item": {"id": "i2", "type": "mcp_tool_call", "server": "apex-grader", "tool": "grade_solution",
                                            "arguments": {"task_id": "cpu-mini__rms_norm"}, "status": "completed",
                                            "result": {"content": [], "structured_content": {"outcome": "ok"}}, "error": None}},
        {"type": "item.completed", "item": {"id": "i3", "type": "command_execution", "command": "python -c 1",
                                            "aggregated_output": "", "exit_code": 1, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "i4", "type": "agent_message", "text": "Graded: ok."}},
        {"type": "turn.completed", "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 300}},
    ]
    reading = codex.read_session(_session(events))
    assert [(c.name, c.ok) for c in reading.tool_calls] == [("apply_patch", True), ("apex-grader.grade_solution", True),
                                                            ("shell", False)]
    assert '"outcome": "ok"' in reading.tool_calls[1].result and reading.turns == 4
    assert reading.summary.startswith("4 actions; 1200 input and 300 output tokens; Graded: ok.") and not reading.host_failure


def test_a_session_gets_no_stdin_so_a_host_reading_it_never_waits(tmp_path):
    """codex exec reads stdin to its end when it is not a terminal; under the apex-pipeline MCP
    server stdin is the MCP session itself, open until the host hangs up."""
    read_end, write_end = os.pipe()  # stands for that session: open, silent
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        session = headless.run_session([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"], tmp_path, 10)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert session.exit_code == 0 and session.stdout.strip() == "''"


def test_codex_without_a_network_is_the_hosts_failure_even_when_the_time_limit_ends_it():
    recorded = (DATA / "codex-0.171.0-network-down.jsonl").read_text()  # codex exec with no route to its API
    reading = codex.read_session(headless.Session(recorded, "", None, headless.json_lines(recorded)))
    assert reading.host_failure.startswith("Codex never reached its model") and not reading.login_refused
    refused = codex.read_session(_session([{"type": "turn.started"},
                                           {"type": "turn.failed", "error": {"message": "401 Unauthorized: invalid api key"}}], 1))
    assert refused.login_refused


def test_cursor_runs_headless_with_mcp_approval_and_reads_its_stream_json(tmp_path):
    argv = CursorAgent(executable="agent", model="auto").command("SYSTEM", "PROMPT", tmp_path)
    assert argv[:4] == ["agent", "-p", "--output-format", "stream-json"] and "--approve-mcps" in argv and "--force" in argv
    assert argv[argv.index("--workspace") + 1] == str(tmp_path)
    events = [
        {"type": "system", "subtype": "init", "model": "auto", "session_id": "s"},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Writing it."}]}},
        {"type": "tool_call", "subtype": "started", "call_id": "c1",
         "tool_call": {"writeToolCall": {"args": {"path": "solution.py", "fileText": "..."}}}},
        {"type": "tool_call", "subtype": "completed", "call_id": "c1",
         "tool_call": {"writeToolCall": {"args": {"path": "solution.py"}, "result": {"success": {"linesCreated": 9}}}}},
        {"type": "tool_call", "subtype": "completed", "call_id": "c2",
         "tool_call": {"mcpToolCall": {"args": {"toolName": "grade_solution", "args": {}}, "result": {"error": {"message": "no"}}}}},
        {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 4200, "result": "Done."},
    ]
    reading = cursor.read_session(_session(events))
    assert [(c.name, c.ok) for c in reading.tool_calls] == [("write", True), ("grade_solution", False)]
    assert reading.turns == 3 and reading.summary == "2 tool calls; 4.2 s; Done." and not reading.host_failure
    broken = cursor.read_session(_session([{"type": "system", "subtype": "init"}], exit_code=1, stderr="Error: ECONNRESET\n"))
    assert broken.host_failure.startswith("Cursor's agent ended (exit 1) without a result")


def test_every_named_backend_is_built_and_a_missing_cli_is_a_clear_error(tmp_path, monkeypatch):
    from apex_core.errors import AgentUnavailableError
    from apex_core.tasks import get_task

    assert isinstance(make_agent("codex"), CodexAgent) and isinstance(make_agent("cursor"), CursorAgent)
    monkeypatch.setenv("PATH", str(tmp_path))
    task = get_task("cpu-mini__rms_norm")
    with pytest.raises(AgentUnavailableError, match="npm install -g @openai/codex"):
        CodexAgent().run(task, "s", "p", tmp_path, tmp_path / "solution.py")
    with pytest.raises(AgentUnavailableError, match="CURSOR_API_KEY"):
        CursorAgent().run(task, "s", "p", tmp_path, tmp_path / "solution.py")
