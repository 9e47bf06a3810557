"""Long verifications: verdicts kept in a JSONL file as they finish, resumed, spread over GPUs.

Verifying every task takes tens of minutes on one GPU (about 44 s per task on an H200). A run that
is cut off must not lose what it finished, a second run must be able to pick up where the first
stopped, and a host with several GPUs should verify one share of the tasks on each. Every process
appends to one file under an exclusive lock, so shares can write side by side.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.tasks.schema import Task
from apex_core.suite.verify import TaskVerification


def append_verdict(path: Path, verdict: TaskVerification) -> None:
    """Add one verdict as a line of ``path``, whole, even while other processes append too."""
    line = verdict.model_dump_json() + "\n"
    with path.open("a", encoding="utf-8") as sink:
        fcntl.flock(sink, fcntl.LOCK_EX)
        try:
            sink.write(line)
            sink.flush()
        finally:
            fcntl.flock(sink, fcntl.LOCK_UN)


def read_verdicts(path: Path) -> dict[str, TaskVerification]:
    """The latest verdict per task in ``path`` ({} when it does not exist); a torn last line is skipped."""
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ApexUserError(f"{path} is not a file of verdicts (not UTF-8 text): give the --jsonl file an earlier "
                            "'apex tasks verify --jsonl' wrote, or a new file name") from None
    verdicts: dict[str, TaskVerification] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            verdict = TaskVerification.model_validate_json(line)
        except ValueError:
            continue  # a process killed mid-write leaves half a line
        verdicts[verdict.task_id] = verdict
    return verdicts


def expected_cost(task: Task) -> int:
    """A rough relative cost of verifying ``task``, from what the H200 runs of 2026-11-30 took:
    builds of C++ sources and the MoE and long-sequence tasks take three to six times a norm's."""
    if task.language == "hip":
        return 6
    if task.kernel in ("fused_moe", "gated_delta_rule", "causal_conv1d"):
        return 4
    if task.kernel in ("gemm_bf16", "gemm_fp8", "prefill_attention", "paged_decode_attention", "mla_decode"):
        return 2
    return 1


def split_by_cost(tasks: list[Task], shares: int) -> list[list[Task]]:
    """``shares`` lists of tasks with costs as even as a greedy split makes them (largest first)."""
    buckets: list[list[Task]] = [[] for _ in range(shares)]
    loads = [0] * shares
    for task in sorted(tasks, key=lambda t: (-expected_cost(t), t.id)):
        lightest = loads.index(min(loads))
        buckets[lightest].append(task)
        loads[lightest] += expected_cost(task)
    return [sorted(bucket, key=lambda t: t.id) for bucket in buckets]


def verify_on_devices(tasks: list[Task], devices: list[str], jsonl: Path, timing: bool) -> dict[str, TaskVerification]:
    """Verify ``tasks`` with one ``apex tasks verify`` process per device, each appending to
    ``jsonl``; returns the verdicts of these tasks found there afterwards.

    Each process times on its own GPU, so no two measurements share a device.
    """
    children = []
    for device, share in zip(devices, split_by_cost(tasks, len(devices))):
        if not share:
            continue
        command = [sys.executable, "-m", "apex_core.cli.main", "tasks", "verify", "--device", device, "--jsonl", str(jsonl)]
        command += [argument for task in share for argument in ("--task", task.id)]
        if not timing:
            command.append("--no-timing")
        children.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
    for child in children:
        child.wait()
    found = read_verdicts(jsonl)
    return {task.id: found[task.id] for task in tasks if task.id in found}
