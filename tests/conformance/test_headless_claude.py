"""Claude Code headless, offline: the scripted model drives a real run that grades through MCP.

``claude -p "grade output/cpu-mini__rms_norm/solution.py and show the score breakdown"`` runs
with ``ANTHROPIC_BASE_URL`` pointing at the scripted model endpoint and our ``.mcp.json`` as its
MCP configuration. The script's first turn calls ``mcp__apex-grader__grade_solution``; Claude Code
runs that tool on the real grader server; the second turn reports the numbers the grader returned.
The test checks each hop: the tool call in the transcript, the grader's structured result coming
back, the request the model received with it, and the final message.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from apex_core.hosting.mcp_registry import SERVERS
from apex_core.score import COMPILED_POINTS, CORRECT_POINTS, speedup_score
from scripted_model import ScriptedModelServer, load_script

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK = "cpu-mini__rms_norm"
PROMPT = f"grade output/{TASK}/solution.py and show the score breakdown"
TOOL = "mcp__apex-grader__grade_solution"
CASES = [
    pytest.param(TASK, "grade-cpu-mini-rms-norm", REPO_ROOT / "apex_core" / "agents" / "canned" / f"{TASK}.py", id="cpu-mini"),
    # The issue's own example; its Triton kernel is timed only on a GPU (on a CPU the run works too,
    # but the grader reports no speedup, which the score assertions below need).
    pytest.param("llama-3-1-8b-instruct__rms_norm", "grade-llama-rms-norm",
                 REPO_ROOT / "reference_solutions" / "rms_norm" / "llama-3-1-8b-instruct.py",
                 id="llama-gpu", marks=pytest.mark.gpu),
]


def _workspace(root: Path, task: str, solution: Path) -> Path:
    """A project folder as a user has it: the repository's .venv, and a solution to grade."""
    target = root / "output" / task / "solution.py"
    target.parent.mkdir(parents=True)
    shutil.copyfile(solution, target)
    (root / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # this worker's environment
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return _workspace(tmp_path / "workspace", TASK, CASES[0].values[2])


@pytest.mark.parametrize(("task", "script", "solution"), CASES)
def test_a_headless_claude_run_grades_through_mcp_and_reports_the_score(npm_clients, client_env, run, tmp_path,
                                                                        task, script, solution):
    claude = npm_clients.bin("claude")
    workspace = _workspace(tmp_path / "workspace", task, solution)
    prompt = f"grade output/{task}/solution.py and show the score breakdown"
    with ScriptedModelServer(load_script(script)) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted"}
        done = run([claude, "-p", prompt, "--mcp-config", str(REPO_ROOT / ".mcp.json"), "--strict-mcp-config",
                    "--allowedTools", TOOL, "--output-format", "stream-json", "--verbose"], env, workspace, timeout=600)
        requests = [r for r in endpoint.requests if r.path.startswith("/v1/messages")]
        finished = endpoint.finished
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    init = next(e for e in events if e["type"] == "system" and e.get("subtype") == "init")
    assert {"name": SERVERS[0].name, "status": "connected"} in init["mcp_servers"]
    assert {f"mcp__{SERVERS[0].name}__{t.name}" for t in SERVERS[0].tools} <= set(init["tools"])

    calls = [b for e in events if e["type"] == "assistant" for b in e["message"]["content"] if b["type"] == "tool_use"]
    assert [c["name"] for c in calls] == [TOOL]
    assert calls[0]["input"] == {"task_id": task, "solution_path": f"output/{task}/solution.py"}

    results = [b for e in events if e["type"] == "user" for b in e["message"]["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result" and b["tool_use_id"] == calls[0]["id"]]
    assert len(results) == 1 and not results[0].get("is_error"), results
    content = results[0]["content"]
    verdict = json.loads(content if isinstance(content, str) else content[0]["text"])
    assert verdict["outcome"] == "ok" and verdict["correct"] and verdict["cases_passed"] == verdict["cases_total"] > 0
    assert Path(verdict["solution_path"]) == (workspace / "output" / task / "solution.py").resolve()
    breakdown = verdict["score_breakdown"]
    assert breakdown["compiled"] == COMPILED_POINTS and breakdown["correct"] == CORRECT_POINTS
    assert breakdown["speedup"] == pytest.approx(speedup_score(verdict["speedup"]))
    assert verdict["score"] == pytest.approx(sum(breakdown.values()))
    assert Path(verdict["result_path"]).is_relative_to(Path(client_env["APEX_CACHE_DIR"]))  # the server ran with our env

    # What the model was sent: the prompt with the grader's tools, then the grader's result.
    assert [r.answered_by for r in requests] == ["turn 1: call the grader", "turn 2: report the score breakdown"] and finished
    first_tools = {t["name"] for t in requests[0].body["tools"]}
    assert TOOL in first_tools and prompt in json.dumps(requests[0].body["messages"])
    assert '"outcome":"ok"' in json.dumps(requests[1].body["messages"][-1]).replace('\\"', '"').replace(" ", "")

    final = events[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and not final["is_error"]
    assert final["permission_denials"] == [] and final["num_turns"] == 2
    expected = (f"Score breakdown: compiled {breakdown['compiled']:g} + correct {breakdown['correct']:g} + "
                f"speedup {breakdown['speedup']:.1f} = {verdict['score']:.1f} (normalized {verdict['normalized_score']:.2f}).")
    assert expected in final["result"], final["result"]
    assert f"{verdict['cases_passed']}/{verdict['cases_total']} cases passed" in final["result"]


def test_without_permission_for_the_tool_the_run_reports_the_denial(npm_clients, client_env, run, workspace):
    """The control: the same run without --allowedTools must not reach the grader."""
    claude = npm_clients.bin("claude")
    with ScriptedModelServer(load_script("grade-cpu-mini-rms-norm")) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted"}
        done = run([claude, "-p", PROMPT, "--mcp-config", str(REPO_ROOT / ".mcp.json"), "--strict-mcp-config",
                    "--output-format", "stream-json", "--verbose"], env, workspace, timeout=300)
        requests = [r for r in endpoint.requests if r.path.startswith("/v1/messages")]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    final = events[-1]
    assert [d["tool_name"] for d in final["permission_denials"]] == [TOOL], final
    # The script's second turn needs a successful grading; a denied call never produces one.
    assert len(requests) == 2 and requests[1].answered_by is None and "does not apply" in (requests[1].error or "")
    assert not (Path(client_env["APEX_CACHE_DIR"]) / "results").exists()


def test_a_headless_claude_run_reads_a_kernels_source_and_a_hardware_fact_through_apex_source(npm_clients, client_env, run,
                                                                                                 workspace):
    claude = npm_clients.bin("claude")
    tools = ["mcp__apex-source__find_kernel", "mcp__apex-source__list_launch_sites", "mcp__apex-source__hardware_facts"]
    prompt = ("where is torch's Triton kernel _sampled_addmm_kernel defined, who launches it, "
              "and what is the MI355X's LDS size per CU with its source?")
    with ScriptedModelServer(load_script("explore-kernel-source")) as endpoint:
        env = {**client_env, "ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": "sk-apex-scripted"}
        done = run([claude, "-p", prompt, "--mcp-config", str(REPO_ROOT / ".mcp.json"), "--strict-mcp-config",
                    "--allowedTools", ",".join(tools), "--output-format", "stream-json", "--verbose"], env, workspace, timeout=600)
        finished = endpoint.finished
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    calls = [b for e in events if e["type"] == "assistant" for b in e["message"]["content"] if b["type"] == "tool_use"]
    assert [c["name"] for c in calls] == tools and finished
    results = {b["tool_use_id"]: b for e in events if e["type"] == "user" for b in e["message"]["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"}
    replies = []
    for call in calls:
        result = results[call["id"]]
        assert not result.get("is_error"), result
        content = result["content"]
        replies.append(json.loads(content if isinstance(content, str) else content[0]["text"]))
    kernel = replies[0]["kernels"][0]
    assert kernel["package"] == "torch" and Path(kernel["location"].rsplit(":", 1)[0]).is_file()

    from apex_core.hardware.specs import SPECS_BY_KEY

    lds = SPECS_BY_KEY["mi355x"].lds_per_cu_kib
    final = events[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and final["permission_denials"] == []
    assert f"defined at {kernel['location']}" in final["result"]
    assert f"launched by {replies[1]['sites'][0]['launcher']}" in final["result"]
    assert f"MI355X LDS per CU: {lds:g} KiB" in final["result"], final["result"]
