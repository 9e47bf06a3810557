"""Running Magpie sandboxed under the reaper, and finding its report without trusting it."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apex_core.grader.isolation import process
from apex_core.grader.magpie.errors import MagpieError, one_line
from apex_core.grader.magpie.workspace import MagpieWorkspace

REPORT_NAME = "compare_report.json"
MAX_REPORT_BYTES = 32 * 1024 * 1024


class MagpieRun(BaseModel):
    """What the Magpie child process did."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str]
    exit_code: int | None
    timed_out: bool
    wall_s: float
    log_tail: str


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Ask the reaper to kill everything below it; then kill its whole group in case it cannot."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _log_tail(path: Path, limit: int = 1500) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - limit))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return one_line(" | ".join(lines[-6:]), 500)


def run_magpie(
    workspace: MagpieWorkspace,
    timeout_s: float,
    *,
    identity: tuple[int, int] | None = None,
    visible_devices: str | None = None,
    memory_bytes: int | None = None,
    python: str = sys.executable,
) -> MagpieRun:
    """Run Magpie under the reaper: minimal environment, sandbox identity, limits, timeout, tree killed."""
    root = Path(workspace.root)
    extra = {"PYTHONPATH": os.pathsep.join([workspace.root, workspace.magpie_root, str(process.PACKAGE_PARENT)])}
    if visible_devices is not None:
        extra["CUDA_VISIBLE_DEVICES"] = extra["HIP_VISIBLE_DEVICES"] = visible_devices
    env = process.worker_environment(Path(workspace.home), extra)
    memory = memory_bytes or process.default_memory_bytes()
    config = {
        "pass_fds": [],
        "scratch": workspace.root,
        "memory_bytes": memory,
        "address_space_bytes": None,
        "cpu_seconds": int(max(600, 20 * timeout_s)),
        "file_bytes": 1024**3,
        "cpus": None,
        "uid": identity[0] if identity else None,
        "gid": identity[1] if identity else None,
    }
    argv = workspace.argv(python)
    started = time.monotonic()
    with open(workspace.log, "wb") as log:
        proc = subprocess.Popen(
            [python, "-s", "-m", "apex_core.grader.isolation.reaper", json.dumps(config), "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=env,
            start_new_session=True,
        )
    timed_out = False
    code: int | None = None
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_tree(proc)
    wall = time.monotonic() - started
    return MagpieRun(argv=argv, exit_code=code, timed_out=timed_out, wall_s=wall, log_tail=_log_tail(Path(workspace.log)))


def check_run(run: MagpieRun, workspace: MagpieWorkspace, timeout_s: float) -> None:
    from apex_core.grader.isolation.reaper import MEMORY_EXCEEDED_EXIT, MEMORY_MARKER

    if run.timed_out:
        raise MagpieError("timeout", f"Magpie did not finish within {timeout_s:g} s; its process tree was killed")
    if run.exit_code == MEMORY_EXCEEDED_EXIT and (Path(workspace.root) / MEMORY_MARKER).exists():
        raise MagpieError("crash", "Magpie's processes exceeded the memory limit and were killed")
    if run.exit_code != 0:
        code = run.exit_code
        how = f"was killed by signal {code - 128}" if code is not None and code > 128 else f"exited with code {code}"
        raise MagpieError("crash", f"Magpie {how}" + (f": {run.log_tail}" if run.log_tail else ""))


def find_report(output_dir: Path) -> Path:
    """The one ``compare_<ts>/compare_report.json`` Magpie wrote into a fresh output directory."""
    try:
        workspaces = sorted(p for p in output_dir.iterdir() if p.name.startswith("compare_"))
    except OSError as exc:
        raise MagpieError("missing_report", f"Magpie's output directory cannot be read ({exc.strerror})") from None
    if not workspaces:
        raise MagpieError("missing_report", f"Magpie wrote no compare_<timestamp> workspace under {output_dir}")
    if len(workspaces) > 1:
        names = ", ".join(p.name for p in workspaces[:4])
        raise MagpieError("malformed_report", f"Magpie's output holds {len(workspaces)} compare workspaces ({names}), expected one")
    workspace = workspaces[0]
    if workspace.is_symlink() or not workspace.is_dir():
        raise MagpieError("malformed_report", f"{workspace.name} is not a plain directory")
    report = workspace / REPORT_NAME
    if not report.exists() and not report.is_symlink():
        raise MagpieError("missing_report", f"Magpie wrote no {REPORT_NAME} in {workspace.name}")
    return report


def read_report(path: Path) -> bytes:
    """The report's bytes: a regular file (no symlink) of at most MAX_REPORT_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise MagpieError("malformed_report", f"{REPORT_NAME} cannot be opened as a plain file ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MagpieError("malformed_report", f"{REPORT_NAME} is not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise MagpieError("malformed_report", f"{REPORT_NAME} is {info.st_size} bytes, above the {MAX_REPORT_BYTES} allowed")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_REPORT_BYTES:
        raise MagpieError("malformed_report", f"{REPORT_NAME} grew above the {MAX_REPORT_BYTES} bytes allowed")
    return data
