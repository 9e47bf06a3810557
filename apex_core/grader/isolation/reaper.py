"""The trusted launcher between the judge and a worker: limits, confinement, and a full clean-up.

The judge starts ``python -m apex_core.grader.isolation.reaper CONFIG_JSON -- WORKER_ARGV...``.
The reaper makes itself a child subreaper (Linux), so processes the solution forks and detaches with
``setsid`` or a double fork are re-parented to it instead of escaping to init; it starts the
worker with resource limits, confined (``sandbox.py``: its own namespaces and mount view, not the
judge's user) unless the config says otherwise, watches the resident memory of everything below it,
and when the worker ends, the judge sends SIGTERM, or the judge is gone (its parent changed: killed,
even with SIGKILL) it kills every descendant before it exits itself. The worker dies with the
reaper (``PR_SET_PDEATHSIG``), so nothing of a grading outlives a judge by more than one poll of
this loop. It never imports solution code.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import time
from pathlib import Path

from apex_core.grader.isolation import sandbox

PR_SET_CHILD_SUBREAPER = 36
MEMORY_EXCEEDED_EXIT = 86
MEMORY_MARKER = "memory-limit-exceeded"
SANDBOX_FAILED_EXIT = sandbox.SETUP_FAILED_EXIT
POLL_S = 0.05
"""How often the reaper checks the worker, its memory and whether the judge is still there."""
PACKAGE_PARENT = Path(__file__).resolve().parents[3]


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) for every process we can see."""
    table: dict[int, tuple[int, int]] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            statm = Path(f"/proc/{entry.name}/statm").read_text().split()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), int(statm[1]) * page)
    return table


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (of each of its threads), from /proc/PID/task/TID/children."""
    kids: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                kids.extend(int(x) for x in handle.read().split())
        except OSError:
            continue
    return kids


def _resident_bytes(pid: int, page: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * page
    except (OSError, IndexError, ValueError):
        return 0


CHILDREN_LISTED = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
"""Whether the kernel lists a process's children (CONFIG_PROC_CHILDREN): then ``descendants``
reads only the tree below the root, not every process of the machine, which a reaper scanning
every 50 ms cannot afford on a busy machine (docs/grader.md, 'Measured reasons')."""


def descendants(root: int) -> tuple[list[int], int]:
    """Every process below ``root`` and their resident memory in bytes."""
    if CHILDREN_LISTED:
        page = os.sysconf("SC_PAGE_SIZE")
        found, stack, seen, rss = [], _children(root), set(), 0
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            found.append(pid)
            rss += _resident_bytes(pid, page)
            stack.extend(_children(pid))
        return found, rss
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack, rss = [], list(children.get(root, [])), 0
    while stack:
        pid = stack.pop()
        found.append(pid)
        rss += table[pid][1]
        stack.extend(children.get(pid, []))
    return found, rss


def kill_below(root: int, rounds: int = 50) -> None:
    """SIGKILL every process below ``root`` now, scanning again until a scan finds none not yet
    killed; nothing waits for them to exit.

    A process with SIGKILL pending runs no more code and cannot fork, so once this returns nothing
    below ``root`` can act, though tearing down a device context may still take a few hundred
    milliseconds and the reaper still has to collect them.
    """
    killed: set[int] = set()
    for _ in range(rounds):
        pids, _ = descendants(root)
        fresh = [pid for pid in pids if pid not in killed]
        if not fresh:
            return
        for pid in fresh:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            killed.add(pid)


def kill_descendants(root: int, rounds: int = 50) -> None:
    """SIGKILL everything below ``root`` and collect it, until nothing is left (orphans come back to
    us as subreaper, so detached processes are collected here too)."""
    for _ in range(rounds):
        kill_below(root)
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG) == (0, 0):
                    time.sleep(0.01)
            except ChildProcessError:
                break
        if not descendants(root)[0]:
            return


def _limits(config: dict) -> None:
    """Runs in the worker between fork and exec."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if config.get("cpus") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(config["cpus"]))
    if config.get("cpu_seconds"):
        seconds = int(config["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    if config.get("file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(config["file_bytes"]),) * 2)
    if config.get("address_space_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (int(config["address_space_bytes"]),) * 2)


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    worker_argv = argv[argv.index("--") + 1 :]
    me = os.getpid()
    judge = os.getppid()
    become_subreaper()
    stop = {"requested": False}

    def on_term(signum: int, frame: object) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_term)
    confine = config.get("confine")
    try:
        view = None
        if confine is not None:
            view = sandbox.worker_view(
                config["scratch"], PACKAGE_PARENT, list(confine.get("writable", [])),
                int(confine.get("tmp_bytes") or 1024**3),
            )
        worker = sandbox.spawn(
            worker_argv, tuple(config.get("pass_fds", ())), lambda: _limits(config), view, os.getcwd()
        )
    except (sandbox.SandboxError, OSError) as error:
        print(f"apex: the worker could not be confined: {error}", flush=True)
        return SANDBOX_FAILED_EXIT
    memory_limit = int(config.get("memory_bytes") or 0)
    code = 0
    while not stop["requested"]:
        done, status = os.waitpid(worker, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if os.getppid() != judge:
            break  # the judge is gone; nobody will read an answer
        if memory_limit:
            _, rss = descendants(me)
            if rss > memory_limit:
                Path(config["scratch"], MEMORY_MARKER).write_text(str(rss))
                code = MEMORY_EXCEEDED_EXIT
                break
        time.sleep(POLL_S)
    kill_descendants(me)
    if os.getppid() != judge and config.get("scratch"):
        # The judge is gone (it exited without closing this worker): nobody will read the log or
        # remove the scratch directory, so do it here instead of leaving it in /tmp.
        shutil.rmtree(config["scratch"], ignore_errors=True)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
