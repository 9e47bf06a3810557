import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from apex_core.agents import ClaudeCodeAgent, DryRunAgent, make_agent
from apex_core.errors import AgentUnavailableError, UnknownNameError
from apex_core.tasks import get_task

# A stand-in for the `claude` CLI at the one true edge (the LLM): it does what a successful
# headless session does — writes the file the prompt names — and prints Claude Code's stream-json
# events: the Write call, its result and the final result.
FAKE_CLAUDE = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import json, re, sys, pathlib
    prompt = sys.argv[sys.argv.index("-p") + 1]
    path = pathlib.Path(re.search(r"Write `([^`]+)`", prompt).group(1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import numpy as np\\n\\ndef rms_norm(x, weight, eps):\\n"
                    "    ms = (x.astype(np.float64) ** 2).mean(-1, keepdims=True)\\n"
                    "    return (x / np.sqrt(ms + eps) * weight).astype(np.float32)\\n")
    # Beside the solution: the one folder a confined session may write besides its own home.
    config = sys.argv[sys.argv.index("--mcp-config") + 1]
    (path.parent / "argv.json").write_text(json.dumps({{"argv": sys.argv[1:], "mcp": json.loads(open(config).read())}}))
    print(json.dumps({{"type": "assistant", "message": {{"content": [
        {{"type": "tool_use", "id": "t1", "name": "Write", "input": {{"file_path": str(path)}}}}]}}}}))
    print(json.dumps({{"type": "user", "message": {{"content": [
        {{"type": "tool_result", "tool_use_id": "t1", "content": "File created"}}]}}}}))
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "num_turns": 4,
                      "result": "Wrote a vectorized RMSNorm.", "total_cost_usd": 0.0123, "session_id": "s"}}))
    """
)


@pytest.fixture
def fake_claude(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return script


def test_the_dry_run_agent_writes_its_stored_solution(tmp_path):
    task = get_task("cpu-mini__rms_norm")
    run = DryRunAgent().run(task, "sys", "prompt", tmp_path, tmp_path / "out" / "solution.py")
    assert run.wrote_solution and (tmp_path / "out" / "solution.py").read_text().startswith('"""RMSNorm vectorized')


def test_the_dry_run_agent_replaces_only_its_own_solution_unless_told_to_overwrite(tmp_path):
    from apex_core.errors import ApexUserError

    task = get_task("cpu-mini__rms_norm")
    solution = tmp_path / "solution.py"
    DryRunAgent().run(task, "sys", "prompt", tmp_path, solution)
    DryRunAgent().run(task, "sys", "prompt", tmp_path, solution)  # its own file again: fine
    solution.write_text("def rms_norm(x, weight, eps):\n    return x  # edited\n")
    with pytest.raises(ApexUserError, match="already exists and is not the stored solution"):
        DryRunAgent().run(task, "sys", "prompt", tmp_path, solution)
    assert "edited" in solution.read_text()
    DryRunAgent(overwrite=True).run(task, "sys", "prompt", tmp_path, solution)
    assert solution.read_text().startswith('"""RMSNorm vectorized')


def test_the_dry_run_agent_says_which_tasks_it_can_answer(tmp_path):
    task = get_task("llama-3-1-8b-instruct__rms_norm")
    with pytest.raises(AgentUnavailableError, match="tasks with one: cpu-mini__rms_norm"):
        DryRunAgent().run(task, "s", "p", tmp_path, tmp_path / "solution.py")


def test_claude_runs_headless_in_the_workspace_and_its_account_is_recorded(tmp_path, fake_claude):
    task = get_task("cpu-mini__rms_norm")
    solution = tmp_path / "output" / task.id / "solution.py"
    prompt = f"Write `{solution}` defining rms_norm."
    run = ClaudeCodeAgent(max_turns=7, model="claude-test").run(task, "system text", prompt, tmp_path, solution)
    assert run.wrote_solution and run.exit_code == 0
    assert "4 turns" in run.summary and "$0.0123" in run.summary and run.turns == 4 and run.attempts == 1
    assert [(c.name, c.ok, c.result) for c in run.tool_calls] == [("Write", True, "File created")]
    seen = json.loads((solution.parent / "argv.json").read_text())
    argv = seen["argv"]
    assert argv[argv.index("--append-system-prompt") + 1] == "system text"
    assert argv[argv.index("--max-turns") + 1] == "7" and argv[argv.index("--model") + 1] == "claude-test"
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert sorted(seen["mcp"]["mcpServers"]) == ["apex-grader", "apex-source"]  # never the patcher or the pipeline
    assert not Path(argv[argv.index("--mcp-config") + 1]).exists()  # it lived in the session's home, removed after
    assert Path(run.transcript_path).read_text().splitlines()[-1].startswith('{"type": "result"')


def test_a_missing_claude_cli_is_a_clear_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AgentUnavailableError, match="npm install -g @anthropic-ai/claude-code"):
        ClaudeCodeAgent().run(get_task("cpu-mini__rms_norm"), "s", "p", tmp_path, tmp_path / "solution.py")


def test_unknown_backends_are_refused():
    with pytest.raises(UnknownNameError, match="agent backend"):
        make_agent("gpt-42")


FLAKY_CLAUDE = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import json, os, pathlib, sys
    count = pathlib.Path(os.environ["FAKE_CLAUDE_COUNT"])
    calls = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(calls))
    mode = os.environ["FAKE_CLAUDE_MODE"]
    if mode == "login":
        print(json.dumps({{"type": "result", "is_error": True, "result": "Invalid API key · Please run /login"}}))
        sys.exit(1)
    if mode == "down" or calls == 1:
        sys.stderr.write("API Error: Connection error.\\n")
        sys.exit(1)
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "done"}}))
    """
)


@pytest.mark.parametrize("mode", ["flaky", "down", "login"])
def test_host_failures_are_retried_and_never_the_agents_and_a_refused_login_stops(tmp_path, monkeypatch, mode):
    from apex_core.agents import headless

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(FLAKY_CLAUDE)
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLAUDE_COUNT", str(tmp_path / "count"))
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    monkeypatch.setattr(headless, "RETRY_WAIT_S", (0.0,))
    task = get_task("cpu-mini__rms_norm")
    agent = ClaudeCodeAgent()
    if mode == "login":
        with pytest.raises(AgentUnavailableError, match="not logged in"):
            agent.run(task, "s", "p", tmp_path, tmp_path / "solution.py")
        return
    run = agent.run(task, "s", "p", tmp_path, tmp_path / "solution.py")
    if mode == "flaky":
        assert run.attempts == 2 and run.infra_error == "" and run.turns == 1
    else:
        assert run.attempts == 1 + headless.HOST_RETRIES and "without a result" in run.infra_error


def test_the_replay_agent_goes_on_with_the_next_recorded_solution_after_a_resume(tmp_path):
    from apex_core.agents.replay import ReplayAgent

    recorded = tmp_path / "trajectory.json"
    recorded.write_text(json.dumps({"task_id": "cpu-mini__rms_norm",
                                    "iterations": [{"solution_code": "first"}, {"solution_code": "second"}]}))
    task = get_task("cpu-mini__rms_norm")
    workspace = tmp_path / "output" / task.id
    solution = workspace / "solution.py"
    ReplayAgent(recorded).run(task, "s", "p", workspace, solution)
    assert solution.read_text() == "first"
    (workspace / "solution_iter1.py").write_text("first")  # the loop keeps each iteration's file
    ReplayAgent(recorded).run(task, "s", "p", workspace, solution)  # a new agent, as after a resume
    assert solution.read_text() == "second"
