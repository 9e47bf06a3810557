"""The reaper cleans up after a judge that vanished without closing its worker."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]

_JUDGE_THAT_DIES = textwrap.dedent(
    """
    import os
    from apex_core.grader.isolation.process import WorkerProcess, WorkerSpec
    worker = WorkerProcess(WorkerSpec(library="numpy", device="cpu"), timeout_s=60)
    print(worker.scratch, flush=True)
    os._exit(0)  # no close(): the judge is simply gone
    """
)


def test_a_worker_whose_judge_exits_without_closing_it_leaves_no_scratch_directory():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _JUDGE_THAT_DIES], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    scratch = Path(done.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 30
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not scratch.exists()


def test_the_tree_below_a_process_is_found_whole_by_its_children_lists():
    import threading

    from apex_core.grader.isolation import reaper

    if not reaper.CHILDREN_LISTED:
        import pytest

        pytest.skip("this kernel does not list a process's children (CONFIG_PROC_CHILDREN)")
    started = []
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & (sleep 60 & sleep 60) & wait"])
    started.append(shell)
    # A child started from another thread is listed under that thread.
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "60"])))
    thread.start()
    thread.join()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            walked, _ = reaper.descendants(os.getpid())
            reaper.CHILDREN_LISTED = False
            try:
                scanned, _ = reaper.descendants(os.getpid())
            finally:
                reaper.CHILDREN_LISTED = True
            if len(scanned) >= 4 and sorted(walked) == sorted(scanned):
                break
            time.sleep(0.05)
        assert len(scanned) >= 4 and sorted(walked) == sorted(scanned)  # the shell, its sleeps, the thread's
    finally:
        for pid in reaper.descendants(os.getpid())[0]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        for process in started:
            process.wait()
