"""Which device a grading runs on, and whether a device the user named exists here.

Checked before anything else happens (a cache lookup, a worker start), so that ``--device 99``
fails with one line on every path: a fresh grading, a cached verdict, a task verification.
"""

from __future__ import annotations

import re

from apex_core.errors import ApexUserError
from apex_core.tasks.schema import Task

_CUDA = re.compile(r"cuda(?::(\d+))?")


def device_from_option(value: str | None, option: str = "--device") -> str | None:
    """A command-line device ('0', 'cuda', 'cuda:1', 'cpu') in torch's spelling; None stays None."""
    if value is None or value == "cpu" or _CUDA.fullmatch(value):
        return value
    if value.isdigit():
        return f"cuda:{value}"
    raise ApexUserError(f"{option} {value!r} is not a device; give a GPU index (0, 1, ...), cuda:N or cpu")


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def require_device(device: str) -> str:
    """``device`` itself when it exists on this machine ('cpu' always does), else an ApexUserError."""
    if device == "cpu":
        return device
    match = _CUDA.fullmatch(device)
    if match is None:
        raise ApexUserError(f"device {device!r} is not a device; give a GPU index (0, 1, ...), cuda:N or cpu")
    index = int(match.group(1) or 0)
    count = gpu_count()
    if index >= count:
        if count == 0:
            raise ApexUserError(f"device {device} does not exist here (no GPU is visible); use --device cpu or leave --device out")
        raise ApexUserError(f"device {device} does not exist here ({count} GPU(s) are visible); use a GPU index below {count} or --device cpu")
    return device


def grading_device(task: Task, requested: str | None) -> str:
    """The device ``task`` is graded on when ``requested`` (None: the default) was asked for.

    CPU tasks run on the CPU; a GPU asked for one is a mistake. Torch tasks run on the GPU asked
    for (which must exist), by default on the first GPU, else on the CPU.
    """
    if task.array_library != "torch":
        if requested not in (None, "cpu"):
            raise ApexUserError(f"{task.id} is a CPU task; leave out --device or give --device cpu")
        return "cpu"
    if requested is None:
        return "cuda" if gpu_count() else "cpu"
    return require_device(requested)
