"""OpenAI Codex headless, offline: a request in plain words runs Apex's whole pipeline.

``codex exec --json "Run the full optimization pipeline for cpu-mini with: ..."`` (the reference
system's README prompt, on the CPU model, with the codex agent backend) runs in a project folder
holding the ``.codex/config.toml`` our hosting renders, with the scripted model endpoint as its
model provider (Responses API) in Codex's own configuration, as a user with a custom provider has
it. The script turns the words into ``run_pipeline``'s typed parameters; Codex calls the real
apex-pipeline server, which benchmarks, identifies, then optimizes with a second, inner Codex
(started by the pipeline, configured by the same CODEX_HOME and key, which reach the server only
through the ``env_vars`` we render), grades, integrates, benchmarks again, scores and reports; the
final message quotes what came back. The test checks the call's parameters, what the inner agent
did, the run on disk (report, leaderboard, trajectory) and the message. The README's Triton prompt
runs the same way: Codex writes the kernel to output/ with apply_patch and grades it.

``run_pipeline`` is approved for the run on the command line (``-c mcp_servers.apex-pipeline.
tools.run_pipeline.approval_mode="approve"``), as Claude Code's test allows it with
``--allowedTools``: Codex runs a tool that does not declare itself read-only only when approved,
and ``exec`` never asks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from apex_core.hosting.hosts import render_codex
from scripted_model import ScriptedModelServer, load_script

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPT = ("Run the full optimization pipeline for cpu-mini with: python kernels only, top 1 bottleneck kernel, "
          "1 optimization iteration, at most 4 agent turns per iteration, codex agent backend, and the leaderboard on.")
KEY_VARIABLE = "OPENAI_API_KEY"
"""The provider's key variable: the usual one, which Apex's rendered config passes to the pipeline's
server (``AGENT_ENVIRONMENT``), so the inner Codex has it as a user's would."""


def provider_config(endpoint: ScriptedModelServer) -> str:
    """Codex's configuration for a custom model provider speaking the Responses API, with nothing
    that would reach OpenAI (no update check, no analytics)."""
    return "\n".join([
        'model = "scripted-model"',
        'model_provider = "scripted"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.scripted]",
        'name = "Apex scripted model"',
        f'base_url = "{endpoint.url}/v1"',
        f'env_key = "{KEY_VARIABLE}"',
        'wire_api = "responses"',
        "",
    ])


def run_codex_in_project(codex: str, client_env: dict[str, str], workspace: Path, script: str, prompt: str,
                         *options: str) -> tuple[subprocess.CompletedProcess[str], ScriptedModelServer]:
    """``codex exec --json`` in a trusted project folder holding our rendered .codex/config.toml,
    with the scripted endpoint playing ``script`` as the model provider (a user's own config)."""
    (workspace / ".codex").mkdir(parents=True)
    (workspace / ".codex" / "config.toml").write_text(render_codex())
    (workspace / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # this worker's environment
    # codex on PATH, for a pipeline that starts its own (the codex agent backend)
    env = {**client_env, KEY_VARIABLE: "sk-apex-scripted", "PATH": f"{Path(codex).parent}{os.pathsep}{client_env['PATH']}"}
    with ScriptedModelServer(load_script(script)) as endpoint:
        config = provider_config(endpoint) + f'\n[projects."{workspace}"]\ntrust_level = "trusted"\n'
        (Path(client_env["CODEX_HOME"]) / "config.toml").write_text(config)
        done = subprocess.run([codex, "exec", "--json", "--skip-git-repo-check", "-c", "mcp_optional_startup_grace_ms=60000",
                               *options, prompt], cwd=workspace, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900, check=False)
    return done, endpoint


def test_a_plain_words_request_runs_the_whole_pipeline_through_codex_and_an_inner_codex_writes_the_kernel(
        npm_clients, client_env, tmp_path):
    workspace = tmp_path / "workspace"
    done, endpoint = run_codex_in_project(npm_clients.bin("codex"), client_env, workspace, "run-pipeline-cpu-mini-codex",
                                          PROMPT, "-c", 'mcp_servers.apex-pipeline.tools.run_pipeline.approval_mode="approve"')
    finished, requests = endpoint.finished, endpoint.requests
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outer = [r.answered_by for r in requests if not (r.answered_by or "").startswith("side:")]
    inner = [r.answered_by for r in requests if (r.answered_by or "").startswith("side:")]
    assert outer == ["turn 1: start the pipeline", "turn 2: report the run"] and finished
    assert inner == ["side: the inner agent writes the solution", "side: the inner agent stops"]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    calls = [i for i in items if i["type"] == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("apex-pipeline", "run_pipeline", "completed")], calls
    settings = calls[0]["arguments"]
    assert (settings["languages"], settings["top_k"], settings["agent"]) == (["python"], 1, "codex")
    reply = json.loads(calls[0]["result"]["content"][0]["text"])
    assert [s["status"] for s in reply["stages"]] == ["done"] * 8, reply["stages"]
    folder = Path(reply["results_dir"])
    assert folder.is_relative_to(workspace.resolve()) and (folder / "report.html").is_file()
    state = json.loads((folder / "state.json").read_text())
    (kernel,) = state["kernels"]
    (iteration,) = kernel["iterations"]
    agent = iteration["agent"]  # what the inner Codex did, as the run and its trajectory record it
    assert agent["backend"] == "codex" and agent["wrote_solution"] and agent["attempts"] == 1 and not agent["infra_error"]
    assert [(c["name"], c["ok"]) for c in agent["tool_calls"]] == [("apply_patch", True)], agent["tool_calls"]
    assert "solution.py" in agent["tool_calls"][0]["arguments"] and agent["turns"] == 3
    assert iteration["grade"]["outcome"] == "ok" and kernel["integrated"]
    trajectory = json.loads(next((folder / "trajectories").glob("*.json")).read_text())
    assert trajectory["iterations"][0]["agent"]["tool_calls"][0]["name"] == "apply_patch"
    assert "# Task cpu-mini__rms_norm" in trajectory["iterations"][0]["prompt"]
    with sqlite3.connect(workspace / "results" / "leaderboard.sqlite") as db:
        assert db.execute("SELECT task_id, agent FROM entries").fetchall() == [("cpu-mini__rms_norm", "codex")]
    final = [i["text"] for i in items if i["type"] == "agent_message"][-1]
    assert events[-1]["type"] == "turn.completed"
    assert f"Pipeline run {reply['run_id']} finished." in final
    assert f"model reward {reply['model_reward']:.3f}" in final, final
    assert "benchmark-final done" in final and "integrated True" in final


TRITON_PROMPT = "Optimize the rms_norm Triton kernel on MI355X. Write the solution to output/, grade it when done, and show the score breakdown."
TRITON_TASK = "llama-3-1-8b-instruct__rms_norm"


def test_the_triton_prompt_in_codex_writes_to_output_grades_through_mcp_and_shows_the_breakdown(npm_clients, client_env,
                                                                                                tmp_path):
    """The README's third prompt: Codex adds the file with apply_patch (its own tool) and grades it
    with the grader's tool, which declares itself read-only, so exec runs it without approval."""
    workspace = tmp_path / "workspace"
    done, endpoint = run_codex_in_project(npm_clients.bin("codex"), client_env, workspace, "optimize-rms-norm-triton-codex",
                                          TRITON_PROMPT)
    finished = endpoint.finished
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert finished
    solution = workspace / "output" / TRITON_TASK / "solution.py"
    assert "@triton.jit" in solution.read_text()
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    calls = [i for i in items if i["type"] == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("apex-grader", "grade_solution", "completed")], calls
    verdict = json.loads(calls[0]["result"]["content"][0]["text"])
    assert verdict["outcome"] == "ok" and verdict["correct"] and Path(verdict["solution_path"]) == solution.resolve()
    breakdown = verdict["score_breakdown"]
    final = [i["text"] for i in items if i["type"] == "agent_message"][-1]
    expected = (f"Score breakdown: compiled {breakdown['compiled']:g} + correct {breakdown['correct']:g} + "
                f"speedup {breakdown['speedup']:.1f} = {verdict['score']:.1f}")
    assert expected in final, final
