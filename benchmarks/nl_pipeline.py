"""The reference README's pipeline prompts, sent to Claude Code headless from the repository root.

``python benchmarks/nl_pipeline.py --model qwen3.5-27b --out DIR`` sends, word for word, "Run the
full optimization pipeline for Qwen3.5 27B with: triton kernels only, top 3 bottleneck kernels,
3 optimization iterations, at most 25 agent turns per iteration, claude agent backend, and the
leaderboard on." to ``claude -p`` with the repository's ``.mcp.json``. The model behind Claude Code
is the scripted endpoint (no login, no network), playing two parts:

- the outer assistant: it turns the words into ``run_pipeline``'s typed parameters and, when the
  pipeline returns, reports what came back (so the final message is right only when the run was);
- the optimizing agent inside the pipeline (``--agent claude`` starts one headless Claude Code per
  iteration, on the same endpoint): in the first iteration it writes our own solution of the task
  (standing in for a competent agent), in later ones it reads its file and breaks it, the way
  agents do, so the loop's feedback, its stop rule (the same failure twice) and the best-so-far
  rule all act. Broken files fail to compile within seconds, which keeps a GPU run short.

The prompt does not name the number of benchmark runs; the script passes ``runs`` (default 2,
``--runs``) so that a run fits the device's ten-minute calls; everything else is the prompt's.
The script's words, the run's state, report and Claude Code's events go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from apex_core.grader import default_cache_dir  # noqa: E402
from apex_core.tasks.catalog import find_tasks  # noqa: E402
from apex_core.tasks.reference_solutions import reference_solution_source  # noqa: E402
from scripted_model import Match, Script, ScriptedModelServer, Turn  # noqa: E402
from scripted_model.clients import headless_host_env  # noqa: E402

TOOL = "mcp__apex-pipeline__run_pipeline"
MODELS = {
    # prompt name, workload id, kernel types the prompt asks for, top k
    "qwen3.5-27b": ("Qwen3.5 27B", "qwen3-5-27b", "triton", 3),
    "gpt-oss-20b": ("GPT-OSS 20B", "gpt-oss-20b", "triton", 3),
    "cpu-mini": ("cpu-mini", "cpu-mini", "python", 1),
}
BROKEN = "# an edit that went wrong: this file no longer parses\ndef solution(:\n"
LATER_ITERATION = "Your last solution"
"""Only the prompts of iterations after the first carry the grader's feedback, which starts so."""


def prompt_for(name: str, kernel_types: str, top_k: int) -> str:
    kernels = "bottleneck kernels" if top_k > 1 else "bottleneck kernel"
    return (f"Run the full optimization pipeline for {name} with: {kernel_types} kernels only, top {top_k} {kernels}, "
            "3 optimization iterations, at most 25 agent turns per iteration, claude agent backend, and the leaderboard on.")


RESUME = "Resume the optimization pipeline run {run_id} where it stopped."
"""The second prompt, for a run a time limit stopped (the state on disk says where)."""


def build_script(model: str, runs: int, resume: Path | None = None) -> Script:
    name, workload, kernel_types, top_k = MODELS[model]
    settings: dict[str, object] = {"workload": workload, "languages": [kernel_types], "top_k": top_k, "iterations": 3,
                                   "max_turns": 25, "agent": "claude", "leaderboard": True, "runs": runs}
    asked = f"Run the full optimization pipeline for {name}"
    if resume is not None:
        settings, asked = {"workload": workload, "resume_run": str(resume)}, RESUME.format(run_id=resume.name)
    report = ("Pipeline run {{ tool_result.run_id }} finished: model reward {{ tool_result.model_reward }}; "
              "end to end {{ tool_result.final.verdict }}.\nStages: {{ tool_result.stages }}\n"
              "Kernels: {{ tool_result.kernels }}\nReport: {{ tool_result.reports }}")
    turns = [
        Turn(name="start the pipeline", match=Match(user_text_contains=asked, tools_include=[TOOL]),
             reply=[{"type": "text", "text": "I'll run the whole pipeline with the settings you gave."},
                    {"type": "tool_use", "name": TOOL, "input": settings}]),
        Turn(name="report the run", match=Match(tool_result_for=TOOL, tool_result_is_error=False),
             reply=[{"type": "text", "text": report}]),
    ]
    # The optimizing agent's sessions: side replies, tried in order, answer whatever the outer
    # conversation is not waiting for. Claude Code refuses to overwrite a file it has not read.
    side = [
        Turn(name="agent: stops after writing", match=Match(tool_result_for="Write", tool_result_is_error=False),
             reply=[{"type": "text", "text": "Wrote solution.py; the pipeline grades it."}]),
        Turn(name="agent: breaks its file (later iteration)", match=Match(tool_result_for="Read"),
             reply=[{"type": "text", "text": "Trying a different approach."},
                    {"type": "tool_use", "name": "Write", "input": {"file_path": "solution.py", "content": BROKEN}}]),
        Turn(name="agent: reads its file (later iteration)", match=Match(user_text_contains=LATER_ITERATION, tools_include=["Read"]),
             reply=[{"type": "tool_use", "name": "Read", "input": {"file_path": "solution.py"}}]),
    ]
    for task in find_tasks(model=workload):
        code = reference_solution_source(task)
        if task.language != kernel_types or code is None:
            continue
        side.append(Turn(name=f"agent: writes {task.id}", match=Match(user_text_contains=f"# Task {task.id}", tools_include=["Write"]),
                         reply=[{"type": "text", "text": f"A first version of {task.kernel}."},
                                {"type": "tool_use", "name": "Write", "input": {"file_path": "solution.py", "content": code}}]))
    return Script(name=f"nl-pipeline-{model}", description=f"The README's pipeline prompt for {name}, both parts.",
                  turns=turns, side_replies=side)


def client_env(home: Path, claude: Path, endpoint: str) -> dict[str, str]:
    env = headless_host_env(home, default_cache_dir())  # Apex keeps the cache it has always used (warm compiles, baselines)
    env.update({
        "ANTHROPIC_BASE_URL": endpoint, "ANTHROPIC_API_KEY": "sk-apex-scripted",
        "PATH": f"{claude.parent}{os.pathsep}{os.environ.get('PATH', '')}",  # the pipeline starts `claude` too
    })
    return env


def run_claude(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[str, str, int]:
    """Claude Code in its own process group: past ``timeout_s`` the whole group (Claude Code, the
    MCP servers, the pipeline and its agents) gets SIGTERM, so the pipeline unwinds its patches and
    saves its state (a later ``run_pipeline`` with ``resume_run`` goes on), then SIGKILL."""
    process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        return stdout, stderr, process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        return stdout, stderr, 124


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--runs", type=int, default=2, help="benchmark runs and final pairs the script passes")
    parser.add_argument("--claude", type=Path, default=Path(shutil.which("claude") or "claude"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=3000)
    parser.add_argument("--resume", action="store_true", help="ask to resume the newest run of the model instead")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    name, workload, kernel_types, top_k = MODELS[args.model]
    prompt = prompt_for(name, kernel_types, top_k)
    resume = None
    if args.resume:
        runs = sorted((REPO_ROOT / "results" / "runs").glob(f"*-{workload}-*"))
        if not runs:
            parser.error(f"--resume: no run of {workload} under results/runs")
        resume = runs[-1]
        prompt = RESUME.format(run_id=resume.name)
    script = build_script(args.model, args.runs, resume)
    (args.out / "script.json").write_text(script.model_dump_json(indent=1))
    home = Path(tempfile.mkdtemp(prefix="apex-nl-home-"))
    (home / ".claude").mkdir()
    started = time.monotonic()
    with ScriptedModelServer(script) as endpoint:
        argv = [str(args.claude), "-p", prompt, "--mcp-config", str(REPO_ROOT / ".mcp.json"), "--strict-mcp-config",
                "--allowedTools", TOOL, "--output-format", "stream-json", "--verbose"]
        stdout, stderr, code = run_claude(argv, client_env(home, args.claude, endpoint.url), args.timeout)
        answered = [{"index": r.index, "answered_by": r.answered_by, "status": r.status, "error": r.error}
                    for r in endpoint.requests]
        finished = endpoint.finished
    elapsed = time.monotonic() - started
    (args.out / "events.jsonl").write_text(stdout)
    (args.out / "stderr.txt").write_text(stderr)
    (args.out / "requests.json").write_text(json.dumps(answered, indent=1))
    events = [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
    final = events[-1] if events else {}
    call = next((b["input"] for e in events if e.get("type") == "assistant" for b in e["message"]["content"]
                 if b.get("type") == "tool_use"), None)
    reply = next((b for e in events if e.get("type") == "user" for b in e["message"]["content"]
                  if isinstance(b, dict) and b.get("type") == "tool_result"), None)
    run_dir = None
    if reply is not None and not reply.get("is_error"):
        content = reply["content"]
        data = json.loads(content if isinstance(content, str) else content[0]["text"])
        run_dir = Path(data["results_dir"])
        for file in ("state.json", "report.md", "report.html", "results_summary.json"):
            if (run_dir / file).is_file():
                shutil.copy(run_dir / file, args.out / file)
    summary = {"prompt": prompt, "claude_exit": code, "seconds": round(elapsed, 1), "script_finished": finished,
               "run_pipeline_input": call, "tool_error": None if reply is None or not reply.get("is_error") else reply["content"],
               "run_dir": str(run_dir) if run_dir else None, "final_message": final.get("result"),
               "agent_sessions": sum(1 for a in answered if (a["answered_by"] or "").startswith("side: agent: writes")),
               "requests": len(answered)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0 if code == 0 and finished and run_dir is not None else 1


if __name__ == "__main__":
    sys.exit(main())
