"""Scratch directories of judges that died are removed by the next judge (scratch.py)."""

import os
import subprocess
import sys

from apex_core.grader.isolation import scratch


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_scratch_of_a_dead_judge_is_removed_and_a_living_ones_is_kept(tmp_path):
    dead = tmp_path / f"apex-worker-{_dead_pid()}-abc"
    living = tmp_path / f"apex-worker-{os.getpid()}-def"
    foreign = tmp_path / "apex-worker-k2j3h4"  # the old naming: whose it is cannot be told
    for directory in (dead, living, foreign):
        (directory / "compile").mkdir(parents=True)
        (directory / "worker.log").write_text("log")
    assert scratch.remove_orphans(tmp_path) == [dead]
    assert not dead.exists() and living.is_dir() and foreign.is_dir()


def test_a_worker_scratch_names_its_judge():
    path = scratch.new_scratch()
    try:
        assert path.name.startswith(f"apex-worker-{os.getpid()}-") and path.stat().st_mode & 0o777 == 0o700
    finally:
        path.rmdir()
