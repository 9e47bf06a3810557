"""Solutions that attack the grader's process model, each with the verdict it must get.

The hack classes of ../shared/research/peers.md that concern processes and files: detached
children, memory exhaustion, killing itself, editing the grader's or the baseline's files.
"""

import os
import textwrap
import time
from pathlib import Path

import pytest

from apex_core.grader.judge import GradeOptions, grade
from apex_core.grader.result import Outcome
from apex_core.tasks import get_task

FAST = GradeOptions(time_budget_s=0.5, timeout_s=30)
CORRECT = textwrap.dedent(
    """
    def _correct(x, weight, eps):
        ms = (x.astype(np.float64) ** 2).mean(-1, keepdims=True)
        return (x / np.sqrt(ms + eps) * weight).astype(np.float32)
    """
)


@pytest.fixture
def task():
    return get_task("cpu-mini__rms_norm")


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text("import numpy as np\nimport os, sys, time\n" + CORRECT + textwrap.dedent(body))
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_child_that_detaches_with_setsid_and_a_double_fork_does_not_survive_the_grading(task, tmp_path):
    pid_file = tmp_path / "daemon.pid"
    body = f"""
    def rms_norm(x, weight, eps):
        if not os.path.exists({str(pid_file)!r}):
            child = os.fork()
            if child == 0:
                os.setsid()
                if os.fork() == 0:
                    open({str(pid_file)!r}, "w").write(str(os.getpid()))
                    time.sleep(600)
                os._exit(0)
            os.waitpid(child, 0)
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), FAST)
    assert result.outcome is Outcome.ok
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(daemon)


def test_one_huge_allocation_fails_inside_the_address_space_limit(task, tmp_path):
    body = """
    def rms_norm(x, weight, eps):
        hoard = np.ones(1 << 40, dtype=np.uint8)
        return _correct(x, weight, eps)
    """
    result = grade(task, write(tmp_path, body), GradeOptions(memory_bytes=1 << 30, timeout_s=30, timing=False))
    assert result.outcome is Outcome.runtime_error
    assert "MemoryError" in result.reason


def test_children_that_together_exceed_the_memory_limit_are_killed(task, tmp_path):
    body = """
    def rms_norm(x, weight, eps):
        for _ in range(4):
            if os.fork() == 0:
                block = np.ones(400 * 1024 * 1024, dtype=np.uint8)
                time.sleep(60)
                os._exit(0)
        time.sleep(60)
        return _correct(x, weight, eps)
    """
    started = time.monotonic()
    result = grade(task, write(tmp_path, body), GradeOptions(memory_bytes=1 << 30, timeout_s=40, timing=False))
    assert result.outcome is Outcome.crash
    assert "memory limit" in result.reason
    assert time.monotonic() - started < 40


def test_a_solution_that_edits_the_grader_is_tampering_and_the_file_is_restored(task, tmp_path):
    target = Path(__file__).resolve().parents[3] / "apex_core" / "score.py"
    original = target.read_bytes()
    body = f"""
    def rms_norm(x, weight, eps):
        with open({str(target)!r}, "a") as handle:
            handle.write("\\nCOMPILED_POINTS = 1000.0\\n")
        return _correct(x, weight, eps)
    """
    try:
        result = grade(task, write(tmp_path, body), FAST)
        assert result.outcome is Outcome.tampering
        assert "score.py" in result.reason
        assert target.read_bytes() == original
    finally:
        target.write_bytes(original)


def test_slowing_the_baseline_by_editing_it_earns_no_speedup(task, tmp_path):
    baseline = task.baseline_path
    original = baseline.read_bytes()
    body = f"""
    _done = []
    def rms_norm(x, weight, eps):
        if not _done:
            with open({str(baseline)!r}, "a") as handle:
                handle.write("\\nimport time as _t\\n_orig = rms_norm\\ndef rms_norm(x, w, e):\\n    _t.sleep(0.05)\\n    return _orig(x, w, e)\\n")
            _done.append(1)
        return _correct(x, weight, eps)
    """
    try:
        result = grade(task, write(tmp_path, body), FAST)
        assert result.outcome is Outcome.tampering
        assert result.speedup is not None and result.speedup <= 1.0
        assert baseline.read_bytes() == original
    finally:
        baseline.write_bytes(original)
