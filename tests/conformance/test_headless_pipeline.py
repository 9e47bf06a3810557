"""Claude Code headless, offline: a request in plain words runs Apex's whole pipeline.

``claude -p "Run the full optimization pipeline for cpu-mini with: ..."`` (the reference system's
README prompt, on the CPU model) runs with the scripted model endpoint and our ``.mcp.json``. The
script turns the words into ``run_pipeline``'s typed parameters; Claude Code calls the real
apex-pipeline server, which benchmarks, identifies, optimizes (with the prompt's claude backend: a
second, headless Claude Code on the same endpoint writes the kernel), grades, integrates, benchmarks
again, scores and reports; the final message quotes what came back. The tests check the call's
parameters, the run on disk (report, leaderboard, state, the inner agent's trajectory) and the
message. The same path runs on a GPU with Qwen3.5 and GPT-OSS (benchmarks/gpu_prompts/).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from scripted_model import ScriptedModelServer, load_script

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOL = "mcp__apex-pipeline__run_pipeline"
CLAUDE_BACKEND_PROMPT = ("Run the full optimization pipeline for cpu-mini with: python kernels only, top 1 bottleneck kernel, "
                         "1 optimization iteration, at most 5 agent turns per iteration, claude agent backend, and the "
                         "leaderboard on.")


def test_the_claude_backend_prompt_runs_an_inner_claude_code_that_writes_the_kernel(npm_clients, client_env, run, tmp_path):
    """The README's prompt as written (claude agent backend): the pipeline, started by one Claude
    Code through MCP, starts another, headless, to write the kernel; both talk to one endpoint."""
    claude = Path(npm_clients.bin("claude"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # this worker's environment
    with ScriptedModelServer(load_script("run-pipeline-cpu-mini-claude")) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted",
               "PATH": f"{claude.parent}{os.pathsep}{client_env['PATH']}"}
        done = run([str(claude), "-p", CLAUDE_BACKEND_PROMPT, "--mcp-config", str(REPO_ROOT / ".mcp.json"),
                    "--strict-mcp-config", "--allowedTools", TOOL, "--output-format", "stream-json", "--verbose"], env,
                   workspace, timeout=900)
        finished = endpoint.finished
        inner = [r for r in endpoint.requests if (r.answered_by or "").startswith("side: the inner agent")]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert finished and [r.answered_by for r in inner] == ["side: the inner agent writes the solution",
                                                           "side: the inner agent stops"]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    calls = [b for e in events if e["type"] == "assistant" for b in e["message"]["content"] if b["type"] == "tool_use"]
    assert [c["name"] for c in calls] == [TOOL]
    settings = calls[0]["input"]
    assert (settings["languages"], settings["top_k"], settings["iterations"], settings["max_turns"], settings["agent"],
            settings["leaderboard"]) == (["python"], 1, 1, 5, "claude", True)
    result = next(b for e in events if e["type"] == "user" for b in e["message"]["content"]
                  if isinstance(b, dict) and b.get("type") == "tool_result")
    assert not result.get("is_error"), result
    content = result["content"]
    reply = json.loads(content if isinstance(content, str) else content[0]["text"])
    assert [s["status"] for s in reply["stages"]] == ["done"] * 8, reply["stages"]
    folder = Path(reply["results_dir"])
    assert folder.is_relative_to(workspace.resolve()) and (folder / "report.html").is_file()
    state = json.loads((folder / "state.json").read_text())
    (iteration,) = state["kernels"][0]["iterations"]
    agent = iteration["agent"]  # what the inner agent did, as the run and its trajectory record it
    assert agent["backend"] == "claude" and agent["wrote_solution"] and agent["turns"] == 2 and agent["attempts"] == 1
    assert [(c["name"], c["ok"]) for c in agent["tool_calls"]] == [("Write", True)] and iteration["grade"]["outcome"] == "ok"
    assert state["kernels"][0]["integrated"]
    trajectory = json.loads(next((folder / "trajectories").glob("*.json")).read_text())
    assert trajectory["iterations"][0]["agent"]["tool_calls"][0]["name"] == "Write"
    assert "# Task cpu-mini__rms_norm" in trajectory["iterations"][0]["prompt"]
    with sqlite3.connect(workspace / "results" / "leaderboard.sqlite") as db:
        assert db.execute("SELECT task_id, agent FROM entries").fetchall() == [("cpu-mini__rms_norm", "claude")]
    final = events[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and final["permission_denials"] == []
    assert f"Pipeline run {reply['run_id']} finished." in final["result"]
    assert f"model reward {reply['model_reward']:.3f}" in final["result"], final["result"]
    assert "benchmark-final done" in final["result"] and "integrated True" in final["result"]


TRITON_PROMPT = "Optimize the rms_norm Triton kernel on MI355X. Write the solution to output/, grade it when done, and show the score breakdown."
TRITON_TASK = "llama-3-1-8b-instruct__rms_norm"


def test_the_triton_prompt_writes_a_solution_to_output_grades_it_and_shows_the_breakdown(npm_clients, client_env, run,
                                                                                          tmp_path):
    claude = npm_clients.bin("claude")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # this worker's environment
    tools = ["Write", "mcp__apex-grader__grade_solution"]
    with ScriptedModelServer(load_script("optimize-rms-norm-triton")) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted"}
        done = run([claude, "-p", TRITON_PROMPT, "--mcp-config", str(REPO_ROOT / ".mcp.json"), "--strict-mcp-config",
                    "--allowedTools", ",".join(tools), "--output-format", "stream-json", "--verbose"], env, workspace,
                   timeout=900)
        finished = endpoint.finished
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    calls = [b for e in events if e["type"] == "assistant" for b in e["message"]["content"] if b["type"] == "tool_use"]
    assert [c["name"] for c in calls] == tools and finished
    solution = workspace / "output" / TRITON_TASK / "solution.py"
    assert "@triton.jit" in solution.read_text()
    results = {b["tool_use_id"]: b for e in events if e["type"] == "user" for b in e["message"]["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"}
    graded = results[calls[1]["id"]]
    assert not graded.get("is_error"), graded
    content = graded["content"]
    verdict = json.loads(content if isinstance(content, str) else content[0]["text"])
    assert verdict["outcome"] == "ok" and verdict["correct"] and Path(verdict["solution_path"]) == solution.resolve()
    breakdown = verdict["score_breakdown"]
    final = events[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and final["permission_denials"] == []
    expected = (f"Score breakdown: compiled {breakdown['compiled']:g} + correct {breakdown['correct']:g} + "
                f"speedup {breakdown['speedup']:.1f} = {verdict['score']:.1f}")
    assert expected in final["result"], final["result"]
