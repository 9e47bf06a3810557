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
# headless session does — writes the file the prompt names — and prints Claude Code's JSON result.
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
    pathlib.Path("argv.json").write_text(json.dumps(sys.argv[1:]))
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
    assert "4 turns" in run.summary and "$0.0123" in run.summary
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--append-system-prompt") + 1] == "system text"
    assert argv[argv.index("--max-turns") + 1] == "7" and argv[argv.index("--model") + 1] == "claude-test"
    assert argv[argv.index("--output-format") + 1] == "json"
    assert Path(run.transcript_path).read_text().startswith('{"type": "result"')


def test_a_missing_claude_cli_is_a_clear_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AgentUnavailableError, match="npm install -g @anthropic-ai/claude-code"):
        ClaudeCodeAgent().run(get_task("cpu-mini__rms_norm"), "s", "p", tmp_path, tmp_path / "solution.py")


def test_unknown_backends_are_refused():
    with pytest.raises(UnknownNameError, match="agent backend"):
        make_agent("gpt-42")
