"""OpenAI Codex headless, offline: a request in plain words runs Apex's whole pipeline.

``codex exec --json "Run the full optimization pipeline for cpu-mini with: ..."`` (the reference
system's README prompt, on the CPU model) runs in a project folder holding the ``.codex/config.toml``
our hosting renders, with the scripted model endpoint as its model provider (Responses API) in
Codex's own configuration, as a user with a custom provider has it. The same script Claude Code's
test uses turns the words into ``run_pipeline``'s typed parameters; Codex calls the real
apex-pipeline server, which benchmarks, identifies, optimizes (replay agent), grades, integrates,
benchmarks again, scores and reports; the final message quotes what came back. The test checks
the call's parameters, the run on disk (report, leaderboard) and the message.

``run_pipeline`` is approved for the run on the command line (``-c mcp_servers.apex-pipeline.
tools.run_pipeline.approval_mode="approve"``), as Claude Code's test allows it with
``--allowedTools``: Codex runs a tool that does not declare itself read-only only when approved,
and ``exec`` never asks.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from apex_core.hosting.hosts import render_codex
from scripted_model import ScriptedModelServer, load_script

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPT = ("Run the full optimization pipeline for cpu-mini with: python kernels only, top 1 bottleneck kernel, "
          "1 optimization iteration, at most 5 agent turns per iteration, replay agent backend, and the leaderboard on.")
KEY_VARIABLE = "APEX_SCRIPTED_MODEL_KEY"


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


def test_a_plain_words_request_runs_the_whole_pipeline_through_codex_and_mcp(npm_clients, client_env, tmp_path):
    codex = npm_clients.bin("codex")
    workspace = tmp_path / "workspace"
    (workspace / ".codex").mkdir(parents=True)
    (workspace / ".codex" / "config.toml").write_text(render_codex())
    (workspace / ".venv").symlink_to(REPO_ROOT / ".venv", target_is_directory=True)
    with ScriptedModelServer(load_script("run-pipeline-cpu-mini")) as endpoint:
        config = provider_config(endpoint) + f'\n[projects."{workspace}"]\ntrust_level = "trusted"\n'
        (Path(client_env["CODEX_HOME"]) / "config.toml").write_text(config)
        env = {**client_env, KEY_VARIABLE: "sk-apex-scripted"}
        done = subprocess.run([codex, "exec", "--json", "--skip-git-repo-check", "-c", "mcp_optional_startup_grace_ms=60000",
                               "-c", 'mcp_servers.apex-pipeline.tools.run_pipeline.approval_mode="approve"', PROMPT],
                              cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=600, check=False)
        finished, requests = endpoint.finished, endpoint.requests
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [(r.path, r.answered_by) for r in requests] == [("/v1/responses", "turn 1: start the pipeline"),
                                                           ("/v1/responses", "turn 2: report the run")] and finished
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    calls = [i for i in items if i["type"] == "mcp_tool_call"]
    assert [(c["server"], c["tool"], c["status"]) for c in calls] == [("apex-pipeline", "run_pipeline", "completed")], calls
    assert calls[0]["arguments"]["kernel_types"] == ["python"] and calls[0]["arguments"]["top_k"] == 1
    reply = json.loads(calls[0]["result"]["content"][0]["text"])
    assert [s["status"] for s in reply["stages"]] == ["done"] * 8, reply["stages"]
    folder = Path(reply["results_dir"])
    assert folder.is_relative_to(workspace.resolve()) and (folder / "report.html").is_file()
    with sqlite3.connect(workspace / "results" / "leaderboard.sqlite") as db:
        assert db.execute("SELECT task_id, agent FROM entries").fetchall() == [("cpu-mini__rms_norm", "replay")]
    final = [i["text"] for i in items if i["type"] == "agent_message"][-1]
    assert events[-1]["type"] == "turn.completed"
    assert f"Pipeline run {reply['run_id']} finished." in final
    assert f"model reward {reply['model_reward']:.3f}" in final, final
    assert "benchmark-final done" in final and "integrated True" in final
