"""The folders a tool's caller may name: inside results/ only, resolved with links followed; a run by
its id or its folder under results/runs. The identifier and the patcher hold their folder
arguments to it, through real in-memory clients."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from fastmcp import Client

from apex_core.errors import ApexUserError
from servers._paths import inside_results, run_folder


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "runs" / "run-1").mkdir(parents=True)
    return (tmp_path / "results").resolve()


def test_a_path_inside_results_is_taken_from_the_working_folder_and_resolved(results):
    assert inside_results("results/exports/rl", "output_dir", "results/x") == results / "exports" / "rl"
    assert inside_results(str(results / "a" / ".." / "b"), "output_dir", "results/x") == results / "b"


@pytest.mark.parametrize("value", ["elsewhere", "results/../elsewhere", "/tmp", "results/runs/../../.."])
def test_a_path_leading_out_of_results_is_refused_saying_what_is_allowed(results, value):
    with pytest.raises(ApexUserError) as refused:
        inside_results(value, "output_dir", "results/exports/rl")
    message = str(refused.value)
    assert message.startswith(f"output_dir {value!r} is outside {results}") and message.endswith("e.g. results/exports/rl")


def test_a_link_inside_results_that_leads_out_is_refused_where_it_leads(results, tmp_path):
    os.symlink(tmp_path / "elsewhere", results / "exports")
    with pytest.raises(ApexUserError, match=f"it leads to {tmp_path.resolve() / 'elsewhere' / 'rl'}"):
        inside_results("results/exports/rl", "output_dir", "results/exports/rl")


def test_a_second_allowed_folder_is_accepted_too(results, tmp_path):
    assert inside_results(str(tmp_path / "cache" / "r"), "results_dir", "x", also=[tmp_path / "cache"]) == tmp_path.resolve() / "cache" / "r"


def test_a_run_is_named_by_its_id_or_its_folder_under_results_runs(results):
    assert run_folder("run-1", "run") == run_folder("results/runs/run-1", "run") == results / "runs" / "run-1"
    assert run_folder(str(results / "runs" / "run-1"), "run") == results / "runs" / "run-1"


@pytest.mark.parametrize("value", ["..", ".", "results/runs", "results/runs/run-1/output", "/tmp", "../x/runs/run-1"])
def test_anything_but_a_run_of_these_results_is_refused(results, value):
    with pytest.raises(ApexUserError, match=rf"^run {value!r} is not a run of this server's results: give a run id"):
        run_folder(value, "run")


def test_a_run_id_that_is_a_link_out_of_the_results_is_refused(results, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", results / "runs" / "linked")
    with pytest.raises(ApexUserError, match="is not a run of this server's results"):
        run_folder("linked", "resume_run")


async def _call(module: str, tool: str, arguments: dict):
    import importlib

    async with Client(importlib.import_module(module).mcp) as client:
        return await client.call_tool(tool, arguments, raise_on_error=False)


def test_identify_kernels_refuses_a_folder_outside_results_before_reading_or_writing_it(results, tmp_path):
    (tmp_path / "profiled").mkdir()
    refused = asyncio.run(_call("servers.identifier", "identify_kernels", {"results_dir": str(tmp_path / "profiled")}))
    assert refused.is_error and refused.content[0].text.startswith(f"results_dir '{tmp_path / 'profiled'}' is outside {results}")
    assert list((tmp_path / "profiled").iterdir()) == []


def test_integrate_winners_reads_gradings_only_in_results_or_the_graders_result_folder(results, tmp_path):
    from apex_core.grader.cache import default_cache_dir

    refused = asyncio.run(_call("servers.patcher", "integrate_winners", {"results_dir": "/"}))
    assert refused.is_error
    assert refused.content[0].text.startswith(f"results_dir '/' is outside {results} or {default_cache_dir().resolve() / 'results'}")
    (results / "gradings").mkdir()
    empty = asyncio.run(_call("servers.patcher", "integrate_winners", {"results_dir": "results/gradings"}))
    assert not empty.is_error and empty.structured_content["winners"] == []


def test_a_nul_character_is_a_readable_error_not_a_crash(results):
    for check in (lambda: run_folder("run\0-1", "run"), lambda: inside_results("results/a\0b", "output_dir", "x")):
        with pytest.raises(ApexUserError, match="holds a NUL character"):
            check()
