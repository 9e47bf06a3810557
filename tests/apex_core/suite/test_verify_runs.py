"""Long verifications keep every verdict, resume where they stopped and spread over devices."""

import json
import subprocess
import sys
from pathlib import Path

from apex_core.tasks import all_tasks, get_task
from apex_core.suite.verify import TaskVerification
from apex_core.suite.verify_runs import append_verdict, expected_cost, read_verdicts, split_by_cost, verify_on_devices

REPO_ROOT = Path(__file__).resolve().parents[3]


def _verdict(task_id: str, passed: bool = True) -> TaskVerification:
    return TaskVerification(task_id=task_id, passed=passed, timed=False, baseline_outcome="ok")


def test_the_latest_verdict_of_a_task_wins_and_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    append_verdict(path, _verdict("a", passed=False))
    append_verdict(path, _verdict("b"))
    append_verdict(path, _verdict("a", passed=True))
    with path.open("a") as sink:
        sink.write('{"task_id": "c", "pass')  # a process killed mid-write
    verdicts = read_verdicts(path)
    assert sorted(verdicts) == ["a", "b"] and verdicts["a"].passed


def test_processes_appending_side_by_side_leave_only_whole_lines(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    writer = (
        "import sys\nfrom pathlib import Path\nfrom apex_core.suite.verify import TaskVerification\n"
        "from apex_core.suite.verify_runs import append_verdict\n"
        "for i in range(40):\n"
        "    append_verdict(Path(sys.argv[1]), TaskVerification(task_id=f'{sys.argv[2]}-{i}', passed=True, timed=False,"
        " baseline_outcome='ok', problems=['x' * 20000]))\n"
    )
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    writers = [subprocess.Popen([sys.executable, "-c", writer, str(path), f"w{n}"], env=env) for n in range(4)]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    lines = path.read_text().splitlines()
    assert len(lines) == 160 and all(json.loads(line)["problems"] == ["x" * 20000] for line in lines)


def test_the_split_over_devices_keeps_every_task_once_with_even_costs():
    tasks = list(all_tasks().values())
    shares = split_by_cost(tasks, 3)
    assert sorted(t.id for share in shares for t in share) == sorted(t.id for t in tasks)
    loads = [sum(expected_cost(t) for t in share) for share in shares]
    assert max(loads) - min(loads) <= max(expected_cost(t) for t in tasks)


def test_two_processes_verify_their_shares_into_one_file(tmp_path):
    sink = tmp_path / "verdicts.jsonl"
    tasks = [get_task("cpu-mini__rms_norm")]
    found = verify_on_devices(tasks, ["cpu", "cpu"], sink, timing=False)
    assert list(found) == ["cpu-mini__rms_norm"] and found["cpu-mini__rms_norm"].passed


def test_resume_skips_the_tasks_with_a_verdict_and_needs_the_file(apex_cli, tmp_path):
    sink = tmp_path / "verdicts.jsonl"
    append_verdict(sink, _verdict("cpu-mini__rms_norm"))
    done = apex_cli("tasks", "verify", "--task", "cpu-mini__rms_norm", "--jsonl", str(sink), "--resume", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["tasks"] == []
    assert "verdict already in" in done.stderr
    done = apex_cli("tasks", "verify", "--task", "cpu-mini__rms_norm", "--resume")
    assert done.returncode == 2 and "give the same --jsonl FILE" in done.stderr


def test_spreading_over_gpus_where_none_are_visible_is_one_clear_line(apex_cli):
    done = apex_cli("tasks", "verify", "--all", "--gpus", "2")
    assert done.returncode == 2 and "--gpus 2: no GPU is visible" in done.stderr
