import json

import pytest

from apex_core.errors import ApexUserError
from apex_core.profiling import KernelRecord, ProfileResult, load_profile, new_run_dir, save_profile


def a_profile(trace_path: str | None = None) -> ProfileResult:
    row = KernelRecord(name="aten::addmm", device="cpu", calls=4, total_time_us=80.0, mean_time_us=20.0, share=1.0, module="Linear")
    return ProfileResult(
        source="torch.profiler", device="cpu", device_name="test cpu", kernels=[row], total_time_us=80.0,
        warmup_calls=1, profiled_calls=2, profiled_wall_s=0.3, unprofiled_wall_s=0.2, trace_path=trace_path,
    )


def test_a_saved_profile_loads_back_equal_with_its_trace_beside_it(tmp_path):
    run_dir = new_run_dir(tmp_path / "results")
    trace = run_dir / "trace.json"
    trace.write_text('{"traceEvents": []}')
    path = save_profile(a_profile(str(trace)), run_dir)
    assert path == run_dir / "profile.json"
    assert json.loads(path.read_text())["trace_path"] == "trace.json"  # relative: the folder can move
    loaded = load_profile(run_dir)
    assert loaded.kernels == a_profile().kernels
    assert loaded.trace_path == str(trace)
    assert loaded.overhead == pytest.approx(0.5)


def test_run_folders_are_new_each_time(tmp_path):
    assert new_run_dir(tmp_path, "a") != new_run_dir(tmp_path, "b")
    with pytest.raises(FileExistsError):
        new_run_dir(tmp_path, "a")


def test_a_folder_without_a_profile_is_a_one_line_user_error(tmp_path):
    with pytest.raises(ApexUserError, match="no profile.json in .*run 'apex profile' first"):
        load_profile(tmp_path)


def test_a_file_that_is_not_a_profile_is_a_one_line_user_error(tmp_path):
    (tmp_path / "profile.json").write_text("{not json")
    with pytest.raises(ApexUserError, match="not valid JSON"):
        load_profile(tmp_path)
    (tmp_path / "profile.json").write_text('{"schema_version": 1, "kernels": "many"}')
    with pytest.raises(ApexUserError, match="is not a valid profile") as error:
        load_profile(tmp_path / "profile.json")
    assert "\n" not in str(error.value)


def test_a_profile_of_another_schema_version_is_refused(tmp_path):
    (tmp_path / "profile.json").write_text('{"schema_version": 99}')
    with pytest.raises(ApexUserError, match="schema version 1 .found 99."):
        load_profile(tmp_path)
