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
    from apex_core.grader.process import WorkerProcess, WorkerSpec
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
