"""The grade cache reads back only what this user's judge signed (cache.py)."""

import json
import os
import stat
from pathlib import Path

from apex_core.grader.cache import KEY_FILE, GradeCache
from apex_core.grader import result_without_solution
from apex_core.tasks import get_task

KEY = "ab" + "0" * 62
OTHER = "cd" + "1" * 62


def a_result():
    task = get_task("cpu-mini__rms_norm")
    return result_without_solution(task, Path("output/cpu-mini__rms_norm/solution.py"), "no solution file")


def test_a_grade_reads_back_and_its_key_file_is_the_users_alone(tmp_path):
    cache = GradeCache(tmp_path)
    result = a_result()
    cache.put(KEY, result)
    assert cache.get(KEY) == result
    key_file = tmp_path / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and key_file.stat().st_uid == os.geteuid()
    assert GradeCache(tmp_path).get(KEY) is not None  # another process of the same user reads it too


def test_an_edited_entry_is_not_read(tmp_path):
    cache = GradeCache(tmp_path)
    cache.put(KEY, a_result())
    path = cache._path(KEY)
    entry = json.loads(path.read_text())
    body = json.loads(entry["body"])
    body.update(outcome="ok", correct=True, compiled=True)
    entry["body"] = json.dumps(body)
    path.write_text(json.dumps(entry))
    assert GradeCache(tmp_path).get(KEY) is None


def test_an_unsigned_entry_written_straight_into_the_cache_is_not_read(tmp_path):
    cache = GradeCache(tmp_path)
    cache.put(OTHER, a_result())  # the key file exists: the forger just cannot sign
    forged = a_result().model_copy(update={"reason": "forged"})
    path = cache._path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(forged.model_dump_json())  # the format before signatures
    assert cache.get(KEY) is None
    path.write_text(json.dumps({"mac": "0" * 64, "body": forged.model_dump_json()}))
    assert cache.get(KEY) is None


def test_an_entry_moved_to_another_key_is_not_read(tmp_path):
    cache = GradeCache(tmp_path)
    cache.put(OTHER, a_result())
    target = cache._path(KEY)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(cache._path(OTHER).read_bytes())
    assert cache.get(OTHER) is not None and cache.get(KEY) is None


def test_a_key_others_can_read_is_replaced_and_voids_what_it_signed(tmp_path):
    GradeCache(tmp_path).put(KEY, a_result())
    key_file = tmp_path / KEY_FILE
    old_key = key_file.read_bytes()
    key_file.chmod(0o644)
    fresh = GradeCache(tmp_path)
    assert fresh.get(KEY) is None
    assert key_file.read_bytes() != old_key and stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_forged_baseline_record_is_ignored(tmp_path):
    cache = GradeCache(tmp_path)
    assert cache.check_baseline("t" * 64, "env", "rows=1", 1000.0) is None
    path = cache._baseline_path("t" * 64, "env")
    path.write_text(json.dumps({"rows=1": 10.0}))  # unsigned: would make every measurement look drifted
    assert cache.check_baseline("t" * 64, "env", "rows=1", 1000.0) is None
