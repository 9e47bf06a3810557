"""The runs under a results folder as a user manages them: each listed with where it stands (a
stage marked running is only running while its run holds the environment's lock), found by id,
prefix or folder, removed, and a second run in one environment refused with the first named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher.journal import STATE_DIR_ENV
from apex_core.pipeline.config import RunConfig
from apex_core.pipeline.run_lock import one_run_per_environment, run_holding_the_lock
from apex_core.pipeline.runs import find_run, remove_runs, run_summaries
from apex_core.pipeline.state import STATE_FILE, RunState, new_run
from tests.conftest import run_apex


@pytest.fixture(autouse=True)
def _private_lock(monkeypatch, tmp_path):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "patch-state"))


def _run(root: Path, **stages: str) -> RunState:
    state = new_run(RunConfig(workload="cpu-mini"), root)
    state.created_at = f"2026-12-04T10:00:{len(list(root.glob('runs/*'))):02d}+00:00"  # one a second, in order
    for name, status in stages.items():
        state.stages[name.replace("_", "-")].status = status  # type: ignore[assignment]
    if stages.get("benchmark") == "failed":
        state.stages["benchmark"].error = "interrupted"
    state.save()
    return state


def test_each_run_is_listed_newest_first_with_where_it_stands(tmp_path):
    results = tmp_path / "results"
    done = _run(results, **{name: "done" for name in ("benchmark", "identify", "optimize", "grade", "integrate",
                                                       "benchmark_final", "score", "report")})
    failed = _run(results, benchmark="done", identify="failed")
    stopped = _run(results, benchmark="done", identify="running")  # killed: nobody holds the lock
    with one_run_per_environment(stopped.run_id):
        listed = {s.run_id: s for s in run_summaries(results)}
        assert run_holding_the_lock() == stopped.run_id
    assert [s.run_id for s in run_summaries(results)] == [stopped.run_id, failed.run_id, done.run_id]
    assert listed[done.run_id].status == "done" and len(listed[done.run_id].stages_done) == 8
    assert (listed[failed.run_id].status, listed[failed.run_id].stage_now) == ("failed", "identify")
    assert (listed[stopped.run_id].status, listed[stopped.run_id].stage_now) == ("running", "identify")
    assert {s.run_id: s.status for s in run_summaries(results)}[stopped.run_id] == "stopped"
    assert run_holding_the_lock() is None


def test_a_second_run_in_one_environment_is_refused_naming_the_first():
    with one_run_per_environment("20261204-101010-cpu-mini-abcdef"):
        with pytest.raises(ApexUserError) as refused:
            with one_run_per_environment("the second"):
                pass
    message = str(refused.value)
    assert "run 20261204-101010-cpu-mini-abcdef (process " in message and "one run at a time" in message
    with one_run_per_environment("after the first ended"):
        pass


def test_a_corrupt_state_is_passed_over_with_its_reason_and_the_other_runs_still_listed(tmp_path):
    results = tmp_path / "results"
    good = _run(results, benchmark="done")
    broken = _run(results)
    (broken.folder / STATE_FILE).write_text("")
    unreadable: list[str] = []
    assert [s.run_id for s in run_summaries(results, unreadable)] == [good.run_id]
    assert len(unreadable) == 1 and str(broken.folder) in unreadable[0] and "not a run state" in unreadable[0]


def test_a_run_is_found_by_id_prefix_folder_or_latest_and_an_ambiguous_prefix_is_refused(tmp_path):
    results = tmp_path / "results"
    first, second = _run(results), _run(results)
    assert find_run(results, first.run_id).run_id == first.run_id
    assert find_run(results, str(second.folder)).run_id == second.run_id
    assert find_run(results, "latest").run_id == max((first, second), key=lambda s: (s.created_at, s.run_id)).run_id
    shared = first.run_id[:4]
    with pytest.raises(ApexUserError, match="give more of the id"):
        find_run(results, shared)
    with pytest.raises(ApexUserError, match="no run 'nope' under .*apex runs list"):
        find_run(results, "nope")


def test_removing_runs_checks_every_name_first_and_refuses_a_running_run(tmp_path):
    results = tmp_path / "results"
    keep, running = _run(results), _run(results, benchmark="running")
    with pytest.raises(ApexUserError, match="no run 'missing'"):
        remove_runs(results, [keep.run_id, "missing"])
    assert keep.folder.is_dir()
    with one_run_per_environment(running.run_id), pytest.raises(ApexUserError, match="is running; stop it first"):
        remove_runs(results, [keep.run_id, running.run_id])
    assert keep.folder.is_dir() and running.folder.is_dir()
    assert [s.run_id for s in remove_runs(results, [keep.run_id, running.run_id])] == [keep.run_id, running.run_id]
    assert not keep.folder.exists() and not running.folder.exists()


def test_apex_runs_list_show_and_rm_on_the_command_line(tmp_path):
    results = tmp_path / "results"
    state = _run(results, benchmark="done", identify="failed")
    env = {STATE_DIR_ENV: str(tmp_path / "patch-state")}
    listed = run_apex("runs", "list", "--results-dir", str(results), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.stdout)["runs"]] == [(state.run_id, "failed")]
    table = run_apex("runs", "list", "--results-dir", str(results), env=env)
    assert state.run_id in table.stdout and "failed (identify)" in table.stdout
    shown = run_apex("runs", "show", state.run_id[:15], "--results-dir", str(results), env=env)
    assert shown.returncode == 0 and "identify" in shown.stdout and str(state.folder) in shown.stdout
    missing = run_apex("runs", "rm", "nope", "--results-dir", str(results), env=env)
    assert missing.returncode == 2 and missing.stderr.startswith("apex: error: no run 'nope'") and "Traceback" not in missing.stderr
    removed = run_apex("runs", "rm", state.run_id, "--results-dir", str(results), env=env)
    assert removed.returncode == 0 and f"removed {state.run_id}" in removed.stdout and not state.folder.exists()
    empty = run_apex("runs", "list", "--results-dir", str(results), env=env)
    assert "no runs under" in empty.stdout
