"""Confinement of a worker: its own namespaces, a mount view of its own, and no rights of the judge's.

Why: a worker runs code an agent wrote. With the judge's rights, such code read the user's home
(SSH keys, agent credentials), other processes' environments, opened network connections,
signalled the judge, could forge cached grades, and changed files every later grading ran
(``servers/grader.py``; a ``.pth`` file in site-packages). Resource limits and the reaper bound
what a worker consumes; this module bounds what it can reach. It uses Linux system calls only
(through ctypes), so it needs nothing installed: no bubblewrap, no setuid helper.

How (``spawn``, called by the reaper, which never runs solution code):

1. A first child enters new mount, PID, network, IPC and UTS namespaces: directly when the judge
   is root, else inside a new user namespace that maps one user, the judge's own, as uid 65534.
2. It forks the namespace's init (pid 1) and exits; the init is re-parented to the reaper (its
   subreaper) and dies with it (``PR_SET_PDEATHSIG``, asked once the first child has been
   collected, and a lifeline pipe closing the race). When the init dies, the kernel kills every
   process left in the namespace.
3. The init builds the view on a fresh tmpfs, pivots into it, detaches the old root, and forks
   the worker (pid 2), which it waits for. The view:
   - read-only: /usr, /etc, /opt and the other system directories; the interpreter's prefixes and
     every directory on its ``sys.path`` (site-packages); Apex's package directory ``apex_core/``
     only (not ``servers/``, ``tests/`` or the reference solutions);
   - writable: the worker's scratch directory (its HOME, TMPDIR and compile caches) and the
     directories the judge names; a private /tmp and /dev/shm (tmpfs, size-capped);
   - its own /proc (no other process is visible; /proc/sys, /proc/driver and a few more read-only),
     /sys read-only, and a /dev with null, zero, full, random, urandom and the GPU nodes
     (/dev/nvidia*, /dev/nvidia-caps, /dev/kfd, /dev/dri);
   - absent: home directories (the grade cache, keys, credentials), /run, /var, everything else;
   - no network: a network namespace with loopback only.
4. The worker drops what it held and execs: as root, it becomes the sandbox user (``nobody``, or
   ``APEX_SANDBOX_USER``) keeping only the groups that own GPU nodes; in a user namespace its uid
   is not 0, so exec clears every capability. ``PR_SET_NO_NEW_PRIVS`` is set either way. The init
   keeps its rights but runs no code but a wait loop, ignores every signal from inside (the kernel
   shields a namespace's init), and cannot be traced (not dumpable; root, where the worker is not).

An agent's session (``View.session``, ``apex_core.agents.confine``) is built the same way, with
three differences: it keeps the host's network, always gets a user namespace of its own, and sees
a whole /proc (so that the grader it starts can confine solutions in turn).

Mounts made while building the view are locked against a candidate that creates a user namespace
of its own (the kernel does not let a less privileged namespace unmount or re-mount them
writable), which is why the view is built before exec and never changed afterwards.
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import os
import platform
import pwd
import select
import signal
import socket
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2
ST_NOATIME = 1024
ST_RELATIME = 4096
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
SYSCALLS = {
    "x86_64": {"pivot_root": 155, "mount_setattr": 442},
    "aarch64": {"pivot_root": 41, "mount_setattr": 442},
}

SANDBOX_USER = "nobody"
"""Who a candidate runs as when the judge is root (``APEX_SANDBOX_USER`` overrides)."""
INNER_ID = 65534
"""The candidate's uid and gid inside a user namespace (the judge's own ids outside)."""
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
BASIC_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
GPU_DEVICES = ("/dev/nvidia*", "/dev/kfd", "/dev/dri")
"""NVIDIA (nvidia0.., nvidiactl, nvidia-uvm, nvidia-modeset, the nvidia-caps directory), AMD (kfd,
dri render nodes)."""
READ_ONLY_PROC = ("sys", "sysrq-trigger", "irq", "bus", "driver")
SETUP_FAILED_EXIT = 87
"""The reaper's exit code when a worker could not be confined; the reason is its last log line."""
STAGING = "/tmp"
"""Where the new root is assembled, inside the worker's own mount namespace only."""


class SandboxError(Exception):
    """Confinement could not be set up here; the message says which step failed and why."""


@dataclass
class View:
    """What a confined worker sees of the file system; every path is absolute."""

    read_only: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    tmp_bytes: int = 1024**3
    """Size cap of the private /tmp and of /dev/shm each (their pages are not anyone's resident
    memory, so the reaper's memory watch would not see them)."""
    session: bool = False
    """An agent's session rather than a solution's worker (``apex_core.agents.confine``): it keeps
    the host's network (its CLI must reach its model's API), runs in a user namespace of its own
    even when the caller is root (so nothing inside holds a capability on the host), and sees a
    whole /proc, without the read-only binds over parts of it, because the grader it starts must
    mount a /proc for its own sandboxes and the kernel refuses that where the visible one is
    partly covered."""


def candidate_identity() -> tuple[int, int] | None:
    """(uid, gid) a confined candidate runs as when the judge is root; None otherwise (then it
    runs in a user namespace, with the judge's ids outside it and none of its capabilities)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(os.environ.get("APEX_SANDBOX_USER", SANDBOX_USER))
        return (entry.pw_uid, entry.pw_gid)
    except KeyError:
        return (65534, 65534)


def worker_view(scratch: str, package_parent: Path, writable: list[str] = (), tmp_bytes: int = 1024**3) -> View:
    """The view of a worker started by this interpreter: what it needs to run, nothing of the user's.

    Directories on ``sys.path`` are kept read-only, except that Apex's package parent (usually the
    repository) contributes only its ``apex_core`` directory, and that none is kept that would
    show too much (``_too_wide``: a home directory, /tmp, the root).
    """
    parent = os.path.realpath(package_parent)
    wide = _wide_places(scratch)
    read_only = [d for d in SYSTEM_DIRS if os.path.lexists(d)]
    candidates = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path]
    for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH"):
        candidates.extend(p for p in os.environ.get(name, "").split(os.pathsep) if p)
    for path in candidates:
        if not path or not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real == parent:
            path = os.path.join(package_parent, "apex_core")
        elif _too_wide(real, wide):
            continue
        if os.path.isfile(path):  # a zip on sys.path
            path = os.path.dirname(path)
        read_only.append(os.path.abspath(path))
    devices = [d for d in BASIC_DEVICES if os.path.exists(d)]
    for pattern in GPU_DEVICES:
        devices.extend(sorted(glob.glob(pattern)))
    return View(
        read_only=_unique(read_only),
        writable=_unique([scratch, *writable]),
        devices=_unique(devices),
        tmp_bytes=tmp_bytes,
    )


def _wide_places(scratch: str) -> list[str]:
    places = [os.path.realpath(scratch), "/tmp", "/var/tmp", "/proc", "/sys", "/dev", "/run"]
    for home in {os.path.expanduser("~"), os.environ.get("HOME", "")}:
        if home and os.path.isabs(home):
            places.append(os.path.realpath(home))
    return places


def _too_wide(real: str, places: list[str]) -> bool:
    """Whether binding ``real`` would show one of ``places`` (a home, /tmp, the scratch directory,
    the kernel's file systems), or something inside the scratch directory or those file systems."""
    return any(real == place or _is_within(real, place) for place in places) or any(
        _is_within(place, real) for place in places[:1] + ["/proc", "/sys", "/dev"]
    )


def _is_within(parent: str, path: str) -> bool:
    """Whether ``parent`` is a proper ancestor of ``path`` (two absolute, normalized paths)."""
    return path.startswith(parent.rstrip("/") + "/")


def _unique(paths: list[str]) -> list[str]:
    seen: set[str] = set()
    return [p for p in paths if not (p in seen or seen.add(p))]


# --- system calls --------------------------------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_LIBC.unshare.argtypes = [ctypes.c_int]
_LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(number)} (errno {number})")


def _encode(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None, what: str = ""
) -> None:
    shown = target[len(STAGING):] if target.startswith(STAGING + "/") else target
    _check(_LIBC.mount(_encode(source), _encode(target), _encode(fstype), flags, _encode(data)), what or f"mount {shown}")


def unshare(flags: int) -> None:
    _check(_LIBC.unshare(flags), "unshare")


def prctl(option: int, value: int) -> None:
    _check(_LIBC.prctl(option, value, 0, 0, 0), f"prctl {option}")


def _syscall_number(name: str) -> int:
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        raise SandboxError(f"no {name} system call number known for {platform.machine()}")
    return numbers[name]


def pivot_root(new_root: str, put_old: str) -> None:
    result = _LIBC.syscall(_syscall_number("pivot_root"), _encode(new_root), _encode(put_old))
    _check(result, "pivot_root")


def _read_only_recursively(target: str) -> None:
    """Make the mount at ``target`` and every mount below it read-only."""

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    try:
        number = _syscall_number("mount_setattr")
    except SandboxError:
        number = None
    if number is not None:
        AT_FDCWD = -100
        done = _LIBC.syscall(number, AT_FDCWD, _encode(target), AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
        if done == 0:
            return
    # Kernels before 5.12: re-mount each mount read-only, keeping the flags the kernel locked.
    for point in [target, *_mounts_below(target)]:
        _remount_read_only(point, required=point == target)


def _remount_read_only(target: str, required: bool = True) -> None:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | _atime_and_exec_flags(target)
    result = _LIBC.mount(None, _encode(target), None, flags, None)
    if required:
        _check(result, f"read-only remount of {target}")


def _mounts_below(target: str) -> list[str]:
    below = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = line.split()[4].encode().decode("unicode_escape")
            if _is_within(target, point):
                below.append(point)
    return below


# --- the view ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    kind: str
    """'symlink', 'bind' or 'tmpfs'."""
    target: str
    source: str = ""
    """The link's text for a symlink; the real path mounted for a bind."""
    writable: bool = False
    device: bool = False
    options: str = ""


def plan(view: View) -> list[_Step]:
    """The steps that build ``view`` under a new root, parents before children (reads the host's
    file system, changes nothing)."""
    steps: list[_Step] = [
        _Step("tmpfs", "/tmp", options=f"mode=1777,size={view.tmp_bytes}"),
        _Step("tmpfs", "/dev", options="mode=0755,size=1m"),
        _Step("tmpfs", "/dev/shm", options=f"mode=1777,size={view.tmp_bytes}"),
        _Step("symlink", "/dev/fd", "/proc/self/fd"),
        _Step("symlink", "/dev/stdin", "/proc/self/fd/0"),
        _Step("symlink", "/dev/stdout", "/proc/self/fd/1"),
        _Step("symlink", "/dev/stderr", "/proc/self/fd/2"),
    ]
    bound: list[str] = []
    read_only = sorted(view.read_only, key=lambda p: os.path.realpath(p).count("/"))
    for path, writable in [*((p, False) for p in read_only), *((p, True) for p in view.writable)]:
        links, real = _resolve(path)
        steps.extend(_Step("symlink", link, text) for link, text in links)
        if not writable and any(real == b or _is_within(b, real) for b in bound):
            continue  # already visible, read-only, through a directory bound above it
        if not writable:
            bound.append(real)
        steps.append(_Step("bind", real, real, writable=writable))
    steps.extend(_Step("bind", device, os.path.realpath(device), writable=True, device=True) for device in view.devices)
    depth = {"tmpfs": 0, "symlink": 1, "bind": 2}
    return sorted(steps, key=lambda s: (s.target.count("/"), depth[s.kind]))


def _resolve(path: str, hops: int = 0) -> tuple[list[tuple[str, str]], str]:
    """The symbolic links met on the way to ``path`` (to be made again in the view) and the real
    path it names."""
    if hops > 16:
        raise SandboxError(f"too many symbolic links on the way to {path}")
    links: list[tuple[str, str]] = []
    current = "/"
    for part in Path(path).parts[1:]:
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            text = os.readlink(candidate)
            links.append((candidate, text))
            more, current = _resolve(os.path.normpath(os.path.join(current, text)), hops + 1)
            links.extend(more)
        else:
            current = candidate
    return links, current


def _build(view: View, cwd: str) -> None:
    """In the worker's own mount namespace: assemble the view under STAGING and pivot into it."""
    steps = plan(view)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Every bind source is opened before anything is mounted over it (STAGING shadows /tmp).
    sources = {
        s.source: os.open(s.source, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW) for s in steps if s.kind == "bind"
    }
    mask = os.umask(0o022)
    try:
        mount("tmpfs", STAGING, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
        for step in steps:
            _take(step, STAGING + step.target, sources)
        proc = STAGING + "/proc"
        os.makedirs(proc, exist_ok=True)
        mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              what="mounting a /proc of its own (refused where parts of /proc are hidden, as in many containers)")
        for name in () if view.session else READ_ONLY_PROC:
            path = f"{proc}/{name}"
            if os.path.exists(path):
                mount(path, path, None, MS_BIND | MS_REC)
                _read_only_recursively(path)
        sysfs = STAGING + "/sys"
        os.makedirs(sysfs, exist_ok=True)
        mount("/sys", sysfs, None, MS_BIND | MS_REC)
        _read_only_recursively(sysfs)
        _remount_read_only(STAGING + "/dev")
        for fd in sources.values():
            os.close(fd)
        os.chdir(STAGING)
        pivot_root(".", ".")
        _check(_LIBC.umount2(b".", MNT_DETACH), "detaching the old root")
        os.chdir("/")
        _remount_read_only("/")
    finally:
        os.umask(mask)
    os.chdir(cwd)


def _take(step: _Step, where: str, sources: dict[str, int]) -> None:
    if step.kind == "symlink":
        if not os.path.lexists(where):
            os.makedirs(os.path.dirname(where), exist_ok=True)
            os.symlink(step.source, where)
        return
    if step.kind == "tmpfs":
        os.makedirs(where, exist_ok=True)
        mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, step.options)
        return
    fd = sources[step.source]
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(where, exist_ok=True)
    elif not os.path.exists(where):
        os.makedirs(os.path.dirname(where), exist_ok=True)
        os.close(os.open(where, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    mount(f"/proc/self/fd/{fd}", where, None, MS_BIND | MS_REC)
    if step.device:
        return  # GPU nodes and their directories keep the host's flags (never nodev)
    if step.writable:
        flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | _atime_and_exec_flags(where)
        _check(_LIBC.mount(None, _encode(where), None, flags, None), f"nosuid remount of {where}")
    else:
        _read_only_recursively(where)


def _atime_and_exec_flags(target: str) -> int:
    """The flags of the mount at ``target`` that a re-mount must repeat (the kernel locks them in a
    user namespace): noexec, nosuid, nodev and the access-time mode."""
    flags = os.statvfs(target).f_flag
    keep = flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    if flags & ST_RELATIME:
        keep |= MS_RELATIME
    elif not flags & ST_NOATIME:
        keep |= MS_STRICTATIME
    return keep


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH", fcntl.ioctl(sock, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def device_groups(devices: list[str]) -> list[int]:
    """Groups owning GPU nodes that others may not open (/dev/kfd and render nodes often)."""
    groups = set()
    for device in devices:
        for path in [device, *glob.glob(os.path.join(device, "*"))] if os.path.isdir(device) else [device]:
            try:
                info = os.stat(path)
            except OSError:
                continue
            if stat.S_ISCHR(info.st_mode) and (info.st_mode & 0o006) != 0o006 and info.st_gid != 0:
                groups.add(info.st_gid)
    return sorted(groups)


# --- starting a process --------------------------------------------------------------------------


def spawn(
    argv: list[str],
    pass_fds: tuple[int, ...],
    prepare: Callable[[], None],
    view: View | None,
    cwd: str,
) -> int:
    """Start ``argv`` (confined to ``view``, or plainly when it is None) and return its pid.

    ``prepare`` runs in the child just before exec (resource limits). Call from a single-threaded
    process that is a child subreaper: the child dies with the caller. Raises SandboxError when the
    child could not be set up; nothing of it is left running then.
    """
    # The caller keeps the write end only: the child sees EOF once the caller is gone.
    lifeline_r, lifeline_w = os.pipe()
    # From the children: 'pid N' (the confined worker's pid) or 'error ...'; EOF once exec'd.
    status_r, status_w = os.pipe()
    # Closed by the caller once it has collected the first child: the worker, now the caller's
    # child, may then ask to die with it (asked earlier, the first child's exit would kill it).
    gate_r, gate_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(lifeline_w)
            os.close(status_r)
            os.close(gate_w)
            _die_with_caller(lifeline_r)
            if view is None:
                _exec(argv, pass_fds, prepare, status_w)
            else:
                _enter(argv, pass_fds, prepare, view, cwd, lifeline_r, gate_r, status_w)
        except BaseException as exc:  # noqa: BLE001 - the child must never return into the caller
            _report(status_w, f"error {exc}")
        os._exit(SETUP_FAILED_EXIT)
    for fd in (lifeline_r, status_w, gate_r):
        os.close(fd)
    messages = ""
    if view is not None:
        messages = _read_line(status_r)  # 'pid N' from the first child, or why it failed
        os.waitpid(child, 0)
    os.close(gate_w)
    messages += _read_all(status_r)
    os.close(status_r)
    pid = child
    for line in messages.splitlines():
        if line.startswith("pid "):
            pid = int(line.split()[1])
    errors = [line[len("error "):] for line in messages.splitlines() if line.startswith("error ")]
    if errors:
        if view is None or pid != child:
            _kill_and_collect(pid)
        raise SandboxError(errors[0])
    _LIFELINES.append(lifeline_w)
    return pid


_LIFELINES: list[int] = []
"""Write ends of the children's lifelines, held open for as long as this process lives."""


def _kill_and_collect(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _read_line(fd: int) -> str:
    """Up to and including the first newline (the writers write whole lines in one write)."""
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        chunks.append(chunk)
        if not chunk or b"\n" in chunk:
            return b"".join(chunks).decode(errors="replace")


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)


def _report(fd: int, line: str) -> None:
    try:
        os.write(fd, (line.replace("\n", " ") + "\n").encode())
    except OSError:
        pass


def _die_with_caller(lifeline_r: int) -> None:
    """SIGKILL this process when its parent dies; exit now if the caller is already gone."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    readable, _, _ = select.select([lifeline_r], [], [], 0)
    if readable:
        os._exit(SETUP_FAILED_EXIT)


def _enter(
    argv: list[str], pass_fds: tuple[int, ...], prepare: Callable[[], None], view: View, cwd: str,
    lifeline_r: int, gate_r: int, status_w: int,
) -> None:
    """The first child: new namespaces, then their init (pid 1), which builds the view and starts
    the worker; this child exits."""
    identity = None if view.session else candidate_identity()
    namespaces = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if view.session else CLONE_NEWNET)
    if identity is None:
        uid, gid = os.geteuid(), os.getegid()
        unshare(CLONE_NEWUSER | namespaces)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{INNER_ID} {uid} 1")
        _write("/proc/self/gid_map", f"{INNER_ID} {gid} 1")
    else:
        unshare(namespaces)
    init = os.fork()
    if init != 0:
        _report(status_w, f"pid {init}")
        os._exit(0)
    try:
        os.read(gate_r, 1)  # EOF: the caller has collected the first child; we are its child now
        os.close(gate_r)
        _die_with_caller(lifeline_r)
        for number in (signal.SIGINT, signal.SIGTERM):  # nothing inside may reach this process
            signal.signal(number, signal.SIG_DFL)
        prctl(PR_SET_DUMPABLE, 0)
        _build(view, cwd)
        if not view.session:
            _loopback_up()
        worker = os.fork()
        if worker == 0:
            try:
                if identity is not None:
                    os.setgroups(device_groups(view.devices))
                    os.setresgid(identity[1], identity[1], identity[1])
                    os.setresuid(identity[0], identity[0], identity[0])
                _exec(argv, pass_fds, prepare, status_w)
            except BaseException as exc:  # noqa: BLE001
                _report(status_w, f"error {exc}")
            os._exit(SETUP_FAILED_EXIT)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the judge's pipes are the worker's alone
        _init(worker)
    except BaseException as exc:  # noqa: BLE001
        _report(status_w, f"error {exc}")
    os._exit(SETUP_FAILED_EXIT)


def _init(worker: int) -> None:
    """Pid 1 of the worker's namespace: collect every process that ends there (orphans come here)
    and, when the worker ends, exit as it did (a signal N as 128 + N), which ends the namespace:
    the kernel kills whatever the solution left running in it.

    The worker is not pid 1 itself: the kernel shields a namespace's init from its own signals, so
    a solution could not even kill itself (or abort) the ordinary way.
    """
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED_EXIT)
        if pid == worker:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(text)
    except OSError as exc:
        raise SandboxError(f"writing {path}: {exc.strerror}") from None


def _exec(argv: list[str], pass_fds: tuple[int, ...], prepare: Callable[[], None], status_w: int) -> None:
    for number in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess does: Python ignores these
        signal.signal(number, signal.SIG_DFL)
    prepare()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    keep = sorted({0, 1, 2, status_w, *pass_fds})
    low = 0
    for fd in [*keep, max(os.sysconf("SC_OPEN_MAX"), keep[-1] + 1)]:
        if fd > low:  # os.closerange(n, n) would close every descriptor from n up
            os.closerange(low, fd)
        low = fd + 1
    for fd in pass_fds:
        os.set_inheritable(fd, True)
    os.execv(argv[0], argv)
