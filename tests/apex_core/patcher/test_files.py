"""A file's recorded state survives JSON readers that hold numbers as doubles."""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from apex_core.patcher.files import FileState, file_state
from apex_core.patcher.journal import JournalEntry
from apex_core.patcher.patcher import EnvironmentStatus


def test_a_file_time_goes_out_as_a_decimal_string_that_a_double_cannot_round(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("x = 1\n")
    state = file_state(target)
    assert state.mtime_ns is not None and state.mtime_ns > 2**53  # past what a double holds exactly
    carried = json.loads(state.model_dump_json())["mtime_ns"]
    assert carried == str(state.mtime_ns)
    assert FileState.model_validate_json(state.model_dump_json()).mtime_ns == state.mtime_ns


def test_a_journal_written_with_numbers_still_reads_exactly():
    entry = JournalEntry.model_validate_json(
        '{"patch": "p1", "target": "/x.py", "original": {"exists": true, "mtime_ns": 1796391112722109673},'
        ' "folder_mtime_ns": 1796391112727833977}')
    assert entry.original.mtime_ns == 1796391112722109673 and entry.folder_mtime_ns == 1796391112727833977


def test_the_status_schema_that_clients_validate_against_says_string():
    schema = TypeAdapter(EnvironmentStatus).json_schema(mode="serialization")["$defs"]
    assert {"type": "string"} in schema["FileState"]["properties"]["mtime_ns"]["anyOf"]
    assert {"type": "string"} in schema["JournalEntry"]["properties"]["folder_mtime_ns"]["anyOf"]
