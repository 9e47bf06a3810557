"""A run's state file is data about its own folder: read from where it is, whatever folder it
claims; a state naming a file outside its folder, or an id that is a path, is refused in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apex_core.agents.base import AgentRun
from apex_core.errors import ApexUserError
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.state import (
    STATE_FILE,
    GradeSummary,
    IterationRecord,
    KernelRecord,
    latest_run,
    load_run,
    new_run,
    read_state,
    run_states,
)


def _run_with_a_kernel(root: Path) -> Path:
    """A run under ``root`` whose state names its files as the pipeline writes them (absolute, in its folder)."""
    state = new_run(RunConfig(workload="cpu-mini"), root)
    work = state.folder / "output" / "cpu-mini__rms_norm"
    grade = GradeSummary(outcome="ok", correct=True, speedup=1.5, speedup_ci95=(1.4, 1.6), score=220, normalized_score=0.5,
                         rl_reward=0.5, result_file=str(work / "grade_iter1.json"))
    agent = AgentRun(backend="replay", solution_path=str(work / "solution.py"), wrote_solution=True, elapsed_s=1.0,
                     transcript_path=str(work / "agent_transcript.jsonl"))
    state.kernels = [KernelRecord(task_id="cpu-mini__rms_norm", kernel="rms_norm", language="python", difficulty=1, rank=1,
                                  kernel_name="rms_norm", device_time_share=0.5, best_solution=str(work / "solution_best.py"),
                                  iterations=[IterationRecord(iteration=1, model=None, agent=agent, grade=grade, feedback="",
                                                              solution_copy=str(work / "solution_iter1.py"))],
                                  final=grade.model_copy(update={"result_file": str(state.folder / "gradings" / "x.json")}))]
    state.baseline = {"tokens_per_s": 10.0, "file": str(state.folder / "benchmark" / "benchmark.json")}
    state.reports = [str(state.folder / "report.md")]
    state.save()
    return state.folder


def _edit(folder: Path, change) -> None:
    path = folder / STATE_FILE
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_moved_run_folder_is_read_where_it_is_and_every_file_it_names_moves_with_it(tmp_path):
    folder = _run_with_a_kernel(tmp_path / "before")
    moved = tmp_path / "after" / "runs" / folder.name
    moved.parent.mkdir(parents=True)
    folder.rename(moved)
    state = load_run(moved)
    assert state.folder == moved.resolve()
    kernel = state.kernels[0]
    work = moved.resolve() / "output" / "cpu-mini__rms_norm"
    assert kernel.best_solution == str(work / "solution_best.py")
    assert kernel.iterations[0].grade.result_file == str(work / "grade_iter1.json")
    assert kernel.iterations[0].agent.transcript_path == str(work / "agent_transcript.jsonl")
    assert kernel.final is not None and kernel.final.result_file == str(moved.resolve() / "gradings" / "x.json")
    assert state.baseline.file == str(moved.resolve() / "benchmark" / "benchmark.json")
    assert state.reports == [str(moved.resolve() / "report.md")]


def test_the_folder_a_state_claims_is_not_where_its_run_writes(tmp_path):
    folder = _run_with_a_kernel(tmp_path)
    _edit(folder, lambda data: data.update(results_dir="/etc"))
    state = load_run(folder)
    assert state.folder == folder.resolve()
    state.save()
    assert json.loads((folder / STATE_FILE).read_text())["results_dir"] == str(folder.resolve())


@pytest.mark.parametrize(("field", "change"), [
    ("kernels[0].best_solution", lambda data: data["kernels"][0].update(best_solution="/etc/passwd")),
    ("kernels[0].iterations[0].grade.result_file",
     lambda data: data["kernels"][0]["iterations"][0]["grade"].update(result_file=data["results_dir"] + "/../../secret.json")),
    ("reports[0]", lambda data: data.update(reports=["../elsewhere/report.md"])),
])
def test_a_state_naming_a_file_outside_its_folder_is_refused_in_one_line_naming_the_field(tmp_path, field, change):
    folder = _run_with_a_kernel(tmp_path)
    _edit(folder, change)
    with pytest.raises(ApexUserError) as refused:
        load_run(folder)
    message = str(refused.value)
    assert f"{field} names" in message and f"outside the run's folder {folder.resolve()}" in message and "\n" not in message


def test_a_file_the_state_names_that_leads_out_through_a_link_is_refused(tmp_path):
    folder = _run_with_a_kernel(tmp_path / "results")
    (folder / "output").mkdir()
    os.symlink(tmp_path / "outside", folder / "output" / "cpu-mini__rms_norm")
    with pytest.raises(ApexUserError, match=r"kernels\[0\]\.best_solution names .*outside the run's folder"):
        load_run(folder)


@pytest.mark.parametrize("key", ["run_id", "trajectory_id", "task_id"])
def test_an_id_that_is_a_path_is_refused_because_it_becomes_a_file_name(tmp_path, key):
    folder = _run_with_a_kernel(tmp_path)
    _edit(folder, lambda data: (data if key == "run_id" else data["kernels"][0]).update({key: "../../../tmp/planted"}))
    with pytest.raises(ApexUserError) as refused:
        read_state(folder / STATE_FILE)
    assert "not a run state Apex can read" in str(refused.value) and "is not a plain name" in str(refused.value)


def test_a_run_folder_linked_in_from_outside_the_results_is_passed_over(tmp_path):
    inside = _run_with_a_kernel(tmp_path / "results")
    outside = _run_with_a_kernel(tmp_path / "elsewhere")
    os.symlink(outside, tmp_path / "results" / "runs" / "linked")
    assert [s.folder for s in run_states(tmp_path / "results")] == [inside.resolve()]
    assert latest_run(tmp_path / "results").folder == inside.resolve()
