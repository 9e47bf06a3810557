import json

from apex_core.hardware import resolve_target
from apex_core.tasks import all_tasks
from apex_core.suite.export import export_records


def test_every_task_exports_its_prompt_baseline_and_reference_without_our_solution_by_default():
    records = list(export_records(list(all_tasks().values()), resolve_target("gfx950")))
    assert [r.task_id for r in records] == sorted(all_tasks())
    for record in records:
        assert record.prompt and record.system and record.baseline and "def " in record.reference
        assert record.reference_solution is None
        json.loads(record.model_dump_json())


def test_solutions_are_exported_only_when_asked_for(apex_cli, tmp_path):
    out = tmp_path / "tasks.jsonl"
    done = apex_cli("tasks", "export", "--format", "jsonl", "--with-solutions", "--output", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len(all_tasks())
    assert all(line["reference_solution"] for line in lines)


def test_an_unknown_export_format_is_one_clear_line(apex_cli):
    done = apex_cli("tasks", "export", "--format", "csv")
    assert done.returncode == 2 and "supported format is jsonl" in done.stderr and "Traceback" not in done.stderr
