"""The pipeline MCP server in memory: a whole cpu-mini run through one tool call (in a child process,
its progress relayed), then its status, the leaderboard and the RL export through the others;
mistakes come back as tool errors."""

import asyncio
import json
import os
from pathlib import Path

import pytest
from fastmcp import Client

from servers.pipeline import mcp

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do


async def _call(name: str, arguments: dict, progress: list[tuple[float, str]] | None = None):
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((done, message or ""))

    async with Client(mcp, progress_handler=on_progress) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def test_run_pipeline_optimizes_cpu_mini_and_the_other_tools_read_the_run(tmp_path, monkeypatch):
    from apex_core.patcher import status

    monkeypatch.chdir(tmp_path)
    assert asyncio.run(_call("list_runs", {})).structured_content == {"runs": [], "unreadable": []}
    progress: list[tuple[float, str]] = []
    ran = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "runs": 2, "iterations": 1, "top_k": 1}, progress))
    assert not ran.is_error, ran.content
    run = ran.structured_content
    assert [s["status"] for s in run["stages"]] == ["done"] * 8
    assert progress[0] == (0.0, "benchmark: starting") and progress[-1][0] == 100.0 and progress[-1][1].startswith("report: done")
    assert any(m.startswith("benchmark-final: round 1/6") for _, m in progress)  # 2 runs, and the 6 pairs of a 95% interval
    journal = status()
    assert journal is None or not journal.active()
    assert run["kernels"][0]["integrated"] and run["model_reward"] > 0.7 and len(run["reports"]) == 2
    status = asyncio.run(_call("pipeline_status", {"workload": "cpu-mini"})).structured_content
    assert status["run_id"] == run["run_id"]
    listed = asyncio.run(_call("list_runs", {})).structured_content["runs"]
    assert [(r["run_id"], r["status"], len(r["stages_done"])) for r in listed] == [(run["run_id"], "done", 8)]
    board = asyncio.run(_call("show_leaderboard", {})).structured_content
    assert board["entries"][0]["task_id"] == "cpu-mini__rms_norm" and board["standings"][0]["agent"] == "replay"
    exported = asyncio.run(_call("export_rl_dataset", {"output_dir": "results/export", "sft": True})).structured_content
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


# --- every folder a caller names stays inside results/ (issue 28) --------------------------------

def test_export_rl_dataset_refuses_a_folder_outside_results_and_writes_nothing_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    os.symlink(tmp_path / "linked", tmp_path / "results" / "exports")
    root = (tmp_path / "results").resolve()
    for output_dir in (str(tmp_path / "outside"), "../outside", "results/../outside", "results/exports/rl"):
        refused = asyncio.run(_call("export_rl_dataset", {"output_dir": output_dir}))
        assert refused.is_error, output_dir
        text = refused.content[0].text
        assert text.startswith(f"output_dir {output_dir!r} is outside {root}") and "e.g. results/exports/rl" in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def _forged_run(tmp_path: Path, **fields: object) -> Path:
    """A run under results/runs whose state.json claims another folder (and whatever ``fields`` say),
    every stage done but the report."""
    from apex_core.pipeline.config import RunConfig
    from apex_core.pipeline.state import STAGES, StageRecord, new_run

    state = new_run(RunConfig(workload="cpu-mini", **fields), tmp_path / "results")
    state.stages = {name: StageRecord(status="pending" if name == "report" else "skipped") for name in STAGES}
    folder = state.folder
    state.results_dir = str(tmp_path / "victim")
    (folder / "state.json").write_text(state.model_dump_json())  # where the run is, claiming the victim's folder
    return folder


def test_a_resumed_run_writes_where_its_state_json_is_never_where_the_file_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _forged_run(tmp_path)
    assert json.loads((folder / "state.json").read_text())["results_dir"] == str(tmp_path / "victim")
    resumed = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "resume_run": folder.name}))
    assert not resumed.is_error, resumed.content
    assert resumed.structured_content["results_dir"] == str(folder)
    assert (folder / "report.md").is_file() and not (tmp_path / "victim").exists()
    status = asyncio.run(_call("pipeline_status", {"run": f"results/runs/{folder.name}"})).structured_content
    assert status["results_dir"] == str(folder) and status["stages"][-1]["status"] == "done"


def test_resume_run_and_pipeline_status_take_only_runs_of_these_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = _forged_run(tmp_path / "elsewhere")
    runs = (tmp_path / "results" / "runs").resolve()
    for tool, key in (("run_pipeline", "resume_run"), ("pipeline_status", "run")):
        for value in (str(elsewhere), f"elsewhere/results/runs/{elsewhere.name}", "results/runs"):
            refused = asyncio.run(_call(tool, {"workload": "cpu-mini", key: value} if tool == "run_pipeline" else {key: value}))
            assert refused.is_error and refused.content[0].text.startswith(
                f"{key} {value!r} is not a run of this server's results: give a run id from list_runs or its folder, {runs}/<run-id>")
    assert not (elsewhere / "report.md").exists()


def test_a_run_whose_state_names_a_replay_file_outside_results_is_not_resumed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _forged_run(tmp_path, replay_from="/etc/passwd")
    refused = asyncio.run(_call("run_pipeline", {"workload": "cpu-mini", "resume_run": folder.name}))
    assert refused.is_error and refused.content[0].text.startswith(
        f"the replay_from of run {folder.name} '/etc/passwd' is outside {(tmp_path / 'results').resolve()}")
    assert not (folder / "report.md").exists()
