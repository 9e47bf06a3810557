"""A worker compiles on the free cores and is pinned to its timing core only for timing."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

_SOLUTION = textwrap.dedent(
    """
    import os
    import numpy as np
    SEEN = []

    def rms_norm(x, weight, eps):
        SEEN.append(sorted(os.sched_getaffinity(0)))
        x64 = x.astype(np.float64)
        return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * weight).astype(x.dtype)
    """
)

_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from apex_core.grader.isolation.worker import Worker
    from apex_core.tasks import get_task
    task = get_task("cpu-mini__rms_norm")
    worker = Worker("numpy", "cpu")
    worker.cpu = int(sys.argv[2])
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(sys.argv[1], task.entry_point, None, [], inputs)["ok"]
    shape = task.benchmark_shapes[0]
    before = sorted(os.sched_getaffinity(0))
    assert worker.stage(shape, [1, 2], 3)["ok"]
    staged = sorted(os.sched_getaffinity(0))
    assert worker.time_samples(4, 0, 0, request_key=5)["ok"]
    seen = sys.modules["apex_solution"].SEEN
    print(json.dumps({"before": before, "staged": staged, "prime": seen[0], "timed": seen[1:]}))
    """
)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_the_first_call_at_a_shape_runs_on_the_free_cores_and_timed_calls_on_the_timing_core(tmp_path):
    solution = tmp_path / "solution.py"
    solution.write_text(_SOLUTION)
    cores = sorted(os.sched_getaffinity(0))
    timing_core = cores[-1]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(solution), str(timing_core)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["before"] == cores and seen["prime"] == cores
    assert seen["staged"] == [timing_core] and all(calls == [timing_core] for calls in seen["timed"])


def test_a_kept_stage_is_taken_up_again_with_the_same_buffers():
    from apex_core.grader.isolation.worker import Worker
    from apex_core.tasks import get_task

    task = get_task("cpu-mini__rms_norm")
    worker = Worker("numpy", "cpu")
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(str(task.baseline_path), task.entry_point, None, [], inputs)["ok"]
    shape = task.benchmark_shapes[0]
    assert worker.stage(shape, [1, 2], 3)["ok"]
    assert worker.keep("calibration-0")["ok"]
    kept_buffers = worker.buffers
    assert worker.stage(shape, [3, 4], 3)["ok"]  # an unnamed stage in between
    assert worker.buffers is not kept_buffers
    assert worker.select("calibration-0")["ok"]
    assert worker.buffers is kept_buffers
    assert worker.rotation.last_timed == {} and worker.timed_outputs == {}


def test_taking_up_a_stage_that_was_never_kept_is_an_infrastructure_error():
    from apex_core.grader.isolation.worker import Worker

    reply = Worker("numpy", "cpu").select("nothing")
    assert reply["ok"] is False and reply["kind"] == "infra_error"


def test_a_released_worker_holds_no_stage_and_says_so_when_asked_to_warm_up():
    from apex_core.grader.isolation.worker import Worker
    from apex_core.tasks import get_task

    task = get_task("cpu-mini__rms_norm")
    worker = Worker("numpy", "cpu")
    inputs = {"ref": task.inputs, "dtype": task.dtype, "params": task.params}
    assert worker.load(str(task.baseline_path), task.entry_point, None, [], inputs)["ok"]
    assert worker.stage(task.benchmark_shapes[0], [1, 2], 3)["ok"]
    assert worker.keep("calibration-0")["ok"]
    assert worker.warmup(3, 0.0)["ok"]
    assert worker.release()["ok"]
    assert worker.pool == [] and worker.buffers == [] and worker.kept_stages == {} and worker.flush_buffer is None
    assert worker.select("calibration-0")["kind"] == "infra_error"
    refused = worker.warmup(3, 0.0)
    assert refused["ok"] is False and "nothing is staged" in refused["message"]
    assert worker.stage(task.benchmark_shapes[0], [3, 4], 3)["ok"] and worker.warmup(3, 0.0)["ok"]  # staged afresh
