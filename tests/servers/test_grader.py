"""The grader MCP server, in memory and over stdio exactly as .mcp.json starts it."""

import asyncio
import json
import os
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from apex_core.grader.result import GradeResult
from apex_core.hosting.mcp_registry import SERVERS
from servers.grader import mcp

REPO_ROOT = Path(__file__).resolve().parents[2]
CANNED = "apex_core/agents/canned/cpu-mini__rms_norm.py"
TRITON_TASK = "llama-3-1-8b-instruct__rms_norm"
TRITON_BASELINE = "apex_core/kernels/rms_norm/baseline_triton.py"


def run(coroutine):
    return asyncio.run(coroutine)


async def _call(name: str, arguments: dict, progress: list | None = None):
    async def on_progress(done, total, message):
        if progress is not None:
            progress.append((done, total, message))

    async with Client(mcp) as client:
        return await client.call_tool(name, arguments, raise_on_error=False, progress_handler=on_progress)


def test_the_registry_lists_exactly_the_tools_the_server_has():
    async def names():
        async with Client(mcp) as client:
            return {tool.name for tool in await client.list_tools()}

    registered = {tool.name for server in SERVERS if server.module == "servers.grader" for tool in server.tools}
    assert run(names()) == registered


def test_every_tool_has_a_description_and_an_output_schema():
    async def tools():
        async with Client(mcp) as client:
            return await client.list_tools()

    for tool in run(tools()):
        assert tool.description and len(tool.description) > 40
        assert tool.outputSchema is not None or getattr(tool, "output_schema", None) is not None


def test_check_correctness_reports_progress_and_a_structured_verdict(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    progress: list = []
    result = run(_call("check_correctness", {"task_id": "cpu-mini__rms_norm", "solution_path": CANNED}, progress))
    assert not result.is_error
    data = result.structured_content
    assert data["outcome"] == "ok" and data["cases_passed"] == data["cases_total"] > 0
    assert data["timings"] == [] and Path(data["result_path"]).is_file()
    assert progress and progress[0][0] == 0.0 and all(total == 100.0 for _, total, _ in progress)
    done = [value for value, _, _ in progress]
    assert all(later > earlier for earlier, later in zip(done, done[1:])), done  # MCP: each report larger


def test_grade_solution_times_against_the_baseline(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    data = run(_call("grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": CANNED})).structured_content
    assert data["outcome"] == "ok" and data["speedup"] > 1
    assert data["score_breakdown"]["compiled"] == 20 and data["rl_reward"] > 0.5


def test_compare_ranks_the_correct_solution_first(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO_ROOT)
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def rms_norm(x, weight, eps):\n    return x.copy()\n")
    data = run(_call("compare", {"task_id": "cpu-mini__rms_norm", "solution_paths": [str(wrong), CANNED]})).structured_content
    assert data["ranking"][0]["solution_path"].endswith("cpu-mini__rms_norm.py")
    assert data["ranking"][1]["outcome"] == "wrong_answer"


def test_mistakes_come_back_as_readable_tool_errors():
    unknown = run(_call("grade_solution", {"task_id": "cpu-mini__rmsnorm", "solution_path": CANNED}))
    assert unknown.is_error and "did you mean 'cpu-mini__rms_norm'" in unknown.content[0].text
    missing = run(_call("check_correctness", {"task_id": "cpu-mini__rms_norm", "solution_path": "/no/such.py"}))
    assert missing.is_error and "does not exist" in missing.content[0].text
    bad_gpu = run(_call("hardware_spec", {"gpu": "gfx9500"}))
    assert bad_gpu.is_error and "did you mean 'gfx950'" in bad_gpu.content[0].text
    too_long = run(_call("check_correctness", {"task_id": "cpu-mini__rms_norm", "solution_path": "s" * 300 + ".py"}))
    assert too_long.is_error and "(303 characters) cannot be opened: File name too long" in too_long.content[0].text


def test_a_bad_argument_is_rejected_before_any_work():
    result = run(_call("grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": CANNED, "timeout_s": -1}))
    assert result.is_error


def test_hardware_spec_reports_the_target_with_sources():
    data = run(_call("hardware_spec", {"gpu": "mi355x"})).structured_content
    assert data["arch"] == "gfx950" and data["spec"]["sources"]["hbm_bandwidth_tbs"]


def test_the_server_answers_over_stdio_as_the_shipped_mcp_json_starts_it(tmp_path):
    entry = json.loads((REPO_ROOT / ".mcp.json").read_text())["mcpServers"]["apex-grader"]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "APEX_CACHE_DIR": str(tmp_path / "cache"), **entry["env"]}
    transport = StdioTransport(command=entry["command"], args=entry["args"], env=env, cwd=str(REPO_ROOT))

    async def session():
        async with Client(transport) as client:
            tools = {tool.name for tool in await client.list_tools()}
            cpu = await client.call_tool(
                "check_correctness", {"task_id": "cpu-mini__rms_norm", "solution_path": CANNED}, raise_on_error=False
            )
            too_long = await client.call_tool(
                "check_correctness", {"task_id": "cpu-mini__rms_norm", "solution_path": "s" * 300 + ".py"}, raise_on_error=False
            )
            triton = await client.call_tool("grade_solution", {"task_id": TRITON_TASK, "solution_path": TRITON_BASELINE},
                                            raise_on_error=False)
            return tools, cpu, too_long, triton

    tools, cpu, too_long, triton = run(session())
    assert "grade_solution" in tools
    assert too_long.is_error and "cannot be opened: File name too long" in too_long.content[0].text
    assert not cpu.is_error and cpu.structured_content["outcome"] == "ok"
    data = triton.structured_content
    assert data["outcome"] == "ok" and data["correct"] and data["speedup"] is None
    assert any(flag.startswith("not_timed") for flag in data["flags"])
    assert json.loads(Path(data["result_path"]).read_text())["provenance"]["timing_method"].startswith("not timed:")


def test_the_triton_task_is_graded_in_memory_with_timing_marked_meaningless_on_the_cpu(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    data = run(_call("grade_solution", {"task_id": TRITON_TASK, "solution_path": TRITON_BASELINE})).structured_content
    if data["timings"]:
        return  # a GPU is present: the Triton task was really timed
    assert data["outcome"] == "ok" and data["cases_passed"] == data["cases_total"]
    assert any(flag.startswith("not_timed") for flag in data["flags"])


def test_a_verdict_graded_on_the_command_line_is_the_tools_cached_verdict_and_vice_versa(apex_cli, monkeypatch, tmp_path):
    monkeypatch.chdir(REPO_ROOT)
    cache = {"APEX_CACHE_DIR": os.environ["APEX_CACHE_DIR"]}  # the one this test's in-memory server uses
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text((REPO_ROOT / CANNED).read_text() + "\n# graded first on the command line\n")
    second.write_text((REPO_ROOT / CANNED).read_text() + "\n# graded first by the tool\n")

    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(first), "--json", env=cache)
    assert done.returncode == 0 and not json.loads(done.stdout)[0]["cached"], done.stderr
    tool = run(_call("grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": str(first)})).structured_content
    assert tool["cached"] and tool["speedup"] == json.loads(done.stdout)[0]["speedup"]

    tool = run(_call("grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": str(second)})).structured_content
    assert not tool["cached"]
    done = apex_cli("grade", "--task", "cpu-mini__rms_norm", "--solution", str(second), "--json", env=cache)
    assert json.loads(done.stdout)[0]["cached"] and json.loads(done.stdout)[0]["speedup"] == tool["speedup"]


def test_a_measurement_that_is_not_a_number_travels_as_the_null_its_schema_allows(monkeypatch):
    """JSON has no NaN or infinity: on the wire they become null, so the schema must allow null there."""
    import jsonschema
    import pydantic_core

    from servers.grader import summarize

    monkeypatch.chdir(REPO_ROOT)
    graded = run(_call("grade_solution", {"task_id": "cpu-mini__rms_norm", "solution_path": CANNED})).structured_content
    result = GradeResult.model_validate_json(Path(graded["result_path"]).read_text())
    nan, inf = float("nan"), float("inf")
    broken = result.model_copy(update={
        "measured_speedup": nan, "speedup_ci95": (nan, inf),
        "timings": [t.model_copy(update={"speedup": nan, "speedup_ci95": (0.9, inf), "solution_median_ns": inf})
                    for t in result.timings],
    })
    summary = summarize(broken)
    wire = json.loads(pydantic_core.to_json(summary.model_dump()))
    schema = run(_tool_schemas())["grade_solution"]
    jsonschema.Draft202012Validator(schema).validate(wire)
    assert wire["timings"][0]["speedup"] is None and wire["timings"][0]["speedup_ci95"] == [0.9, None]
    assert wire["measured_speedup"] is None and wire["timings"][0]["baseline_median_us"] > 0


async def _tool_schemas() -> dict:
    async with Client(mcp) as client:
        return {tool.name: tool.outputSchema for tool in await client.list_tools()}
