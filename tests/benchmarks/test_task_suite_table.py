"""benchmarks/task_suite_table.py renders docs/tasks.md's suite tables from the catalogue, GPU verify
records and identify runs: a task counts as verified only where its latest GPU record passed timed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RECORDED_IDENTIFY = BENCHMARKS / "results" / "workloads-h200-2026-12-01" / "deepseek-r1.json"


def _script():
    spec = importlib.util.spec_from_file_location("task_suite_table", BENCHMARKS / "task_suite_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_task_is_verified_by_its_latest_gpu_record_that_passed_with_timing(tmp_path):
    table = _script()
    first = _records(tmp_path / "a.jsonl", {"task_id": "x__rms_norm", "passed": False, "timed": True},
                     {"task_id": "y__rope", "passed": True, "timed": True},
                     {"task_id": "z__rope", "passed": True, "timed": False})  # a CPU record: correctness only
    later = _records(tmp_path / "b.jsonl", {"task_id": "x__rms_norm", "passed": True, "timed": True},
                     {"task_id": "y__rope", "passed": False, "timed": True})
    assert table.verified_ids([first, later]) == {"x__rms_norm"}
    first_by_date = _records(tmp_path / "verify-h200-2026-12-01-abc.jsonl", *map(json.loads, later.read_text().splitlines()))
    later_by_date = _records(tmp_path / "verify-h200-2026-12-02-abc.jsonl", *map(json.loads, first.read_text().splitlines()))
    assert table.verified_ids([later_by_date, first_by_date]) == {"y__rope"}  # the dates in the names decide
    untimed = _records(tmp_path / "verify-no-timing-2026-12-03.jsonl", {"task_id": "y__rope", "passed": False, "timed": False})
    assert table.verified_ids([first_by_date, later_by_date, untimed]) == {"y__rope"}
    # Two sessions on one day: the session's start time after the date decides, not the commit.
    morning = _records(tmp_path / "verify-h100-2026-12-04T0741-fff.jsonl", *map(json.loads, later.read_text().splitlines()))
    noon = _records(tmp_path / "verify-h100-2026-12-04T1118-aaa.jsonl", *map(json.loads, first.read_text().splitlines()))
    assert table.verified_ids([noon, morning]) == table.verified_ids([later_by_date]) == {"y__rope"}


def test_a_kind_is_observed_for_a_model_above_the_share_and_a_task_through_any_of_its_models():
    table = _script()
    observed = table.observed_kinds([RECORDED_IDENTIFY])
    assert "fused_moe" in observed["deepseek-r1"] and "rms_norm" not in observed.get("deepseek-r1", set())
    from apex_core.tasks import get_task

    assert table.is_observed(get_task("deepseek-r1__fused_moe"), observed)
    assert not table.is_observed(get_task("llama-3-1-8b-instruct__rms_norm"), observed)


def test_the_models_no_identify_run_measured_are_listed_for_the_next_run(tmp_path, capsys):
    table = _script()
    tasks = table.model_tasks()
    everyone = table.unidentified_models(tasks, {})
    assert len(everyone) == 24 and "deepseek-v3" in everyone  # also_models count: V3 has no task of its own
    assert table.unidentified_models(tasks, table.observed_kinds([RECORDED_IDENTIFY])) == [m for m in everyone if m != "deepseek-r1"]
    failed = tmp_path / "identify.json"
    failed.write_text(json.dumps([{"case": "phi-4", "error": "out of memory"}]))
    assert table.main(["--identify", str(RECORDED_IDENTIFY), str(failed), "--list-unidentified"]) == 0
    listed = capsys.readouterr().out.strip().split(",")
    assert "phi-4" in listed and "deepseek-r1" not in listed and len(listed) == 23


def test_the_kind_table_counts_every_model_task_once_and_leaves_the_cpu_demo_out(tmp_path):
    table = _script()
    tasks = table.model_tasks()
    assert tasks and not any(t.model == "cpu-mini" for t in tasks)
    text = table.by_kind(tasks, set(), None)
    assert f"| **all** | | **{len(tasks)}** |" in text and "observed" not in text
    assert sum(int(line.split("|")[3]) for line in text.splitlines()[2:-1]) == len(tasks)
