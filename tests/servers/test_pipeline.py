"""The pipeline MCP server in memory: a whole cpu-mini run through one tool call (in a child process,
its progress relayed), then its status, the leaderboard and the RL export through the others;
mistakes come back as tool errors."""

import asyncio
from pathlib import Path

from fastmcp import Client

from servers.pipeline import mcp


async def _call(name: str, arguments: dict, progress: list[tuple[float, str]] | None = None):
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((done, message or ""))

    async with Client(mcp, progress_handler=on_progress) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def test_run_pipeline_optimizes_cpu_mini_and_the_other_tools_read_the_run(tmp_path, monkeypatch):
    from apex_core.patcher import status

    monkeypatch.chdir(tmp_path)
    assert asyncio.run(_call("list_runs", {})).structured_content == {"runs": []}
    progress: list[tuple[float, str]] = []
    ran = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "runs": 2, "iterations": 1}, progress))
    assert not ran.is_error, ran.content
    run = ran.structured_content
    assert [s["status"] for s in run["stages"]] == ["done"] * 8
    assert progress[0] == (0.0, "benchmark: starting") and progress[-1][0] == 100.0 and progress[-1][1].startswith("report: done")
    assert any(m.startswith("benchmark-final: pair 1/6") for _, m in progress)  # 2 runs, and the 6 pairs of a 95% interval
    journal = status()
    assert journal is None or not journal.active()
    assert run["kernels"][0]["integrated"] and run["model_reward"] > 0.7 and len(run["reports"]) == 2
    status = asyncio.run(_call("pipeline_status", {"workload": "cpu-mini"})).structured_content
    assert status["run_id"] == run["run_id"]
    board = asyncio.run(_call("show_leaderboard", {})).structured_content
    assert board["entries"][0]["task_id"] == "cpu-mini__rms_norm" and board["standings"][0]["agent"] == "replay"
    exported = asyncio.run(_call("export_rl_dataset", {"output_dir": "export", "sft": True})).structured_content
    assert exported["rows"]["sft"] == 1 and Path(exported["files"]["steps"]).is_file()
    learnt = asyncio.run(_call("past_experiments", {"task_id": "cpu-mini__rms_norm"})).structured_content
    assert learnt["tasks"][0]["task_id"] == "cpu-mini__rms_norm" and learnt["past_gradings"][0]["outcome"] == "ok"


def test_a_bad_workload_and_a_missing_run_are_errors_the_model_can_act_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    unknown = asyncio.run(_call("run_pipeline", {"workload": "no-such-model"}))
    assert unknown.is_error and "no-such-model" in unknown.content[0].text
    missing = asyncio.run(_call("pipeline_status", {}))
    assert missing.is_error and "no pipeline run" in missing.content[0].text
    lost = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "resume_run": "results/runs/gone"}))
    assert lost.is_error and lost.content[0].text == (f"{tmp_path.resolve()}/results/runs/gone: no state.json there; give a run "
                                                      "folder that 'apex run' wrote (results/runs/<run-id>)")


def test_a_ray_address_without_the_ray_executor_is_an_error_naming_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "ray_address": "head:6379"}))
    assert refused.is_error and "a Ray address needs executor 'ray'" in refused.content[0].text
    assert not (tmp_path / "results").exists()
