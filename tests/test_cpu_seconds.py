"""The per-test CPU accounting (tests/cpu_seconds.py): off unless asked, and a child's CPU counts."""

import subprocess
import sys

from tests import cpu_seconds


def test_nothing_is_written_unless_a_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(cpu_seconds.DIR_ENV, raising=False)
    with cpu_seconds.recorded("tests/x.py::test_y"):
        pass
    assert not list(tmp_path.iterdir())


def test_a_reaped_childs_cpu_counts_for_the_test_and_the_report_sums_by_module(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_seconds.DIR_ENV, str(tmp_path))
    with cpu_seconds.recorded("tests/a.py::test_busy@group"):
        subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    with cpu_seconds.recorded("tests/a.py::test_idle"):
        pass
    text = cpu_seconds.report(tmp_path)
    busy = next(line for line in text.splitlines() if line.endswith("tests/a.py::test_busy"))
    assert float(busy.split()[0]) >= 0.1  # the child's loop, not this process's
    assert "tests/a.py\n" in text + "\n" and "over 2 tests" in text
