"""An agent's session, confined: what a host CLI, and every tool and MCP server it starts, may
read and write.

Why: a headless host runs the model's tool calls with the rights of whoever ran Apex. Claude Code
was allowed ``Bash(python:*)``, so an agent could patch site-packages (a ``.pth`` file runs at
every Python start) or read anything the user can, our reference solutions included; the deny rule
meant to keep it out of them named them relative to the agent's working folder, the task's
workspace, where they are not, so it matched nothing. Codex's own sandbox keeps its commands'
writes in the workspace but lets them read every file, and Cursor's ``--force`` runs any command.
Each host's permission rules are a first fence of that host's making; this module is the fence
that holds whatever a host lets through, the same for every host.

What a session sees (``session_view``; ``sandbox.spawn`` builds it from a session ``View``):

- read-only: the system directories, the interpreter and every directory on its ``sys.path``
  (site-packages), the host's own installation (its ``node_modules`` folder, or the folder of its
  binary) and node, and of Apex's repository only what an agent reads (``REPOSITORY_ENTRIES``:
  the package, the servers, docs, skills, the docs index, source checkouts, the instructions);
  the source index's files;
- writable: the folder of its solution file, and a private home made for the session (HOME,
  TMPDIR, the XDG folders, the grade cache of the grader it starts) holding copies of the host's
  login and settings (``HOST_STATE``), removed when the session ends; a private /tmp and /dev/shm;
- absent: every home folder (keys, credentials, Apex's own cache with the key that signs
  gradings, the knowledge base), ``reference_solutions/``, the repository's ``.git`` (their
  history), its ``output/`` and ``results/`` (other runs' solutions, replays of ours among them),
  its tests and benchmarks (which hold solutions of their own), ``/run``, ``/var`` and the rest;
- its own user namespace (the caller's uid outside, 65534 inside, no capability on the host,
  ``no_new_privs``), mount, PID (it sees and signals only its own processes, all of which die
  with the session), IPC and UTS namespaces, and the host's network, which its CLI needs to
  reach its model's API.

How: ``Session.command`` wraps a host's command line as ``python -m apex_core.agents.confine
CONFIG -- ARGV``; that launcher, a fresh single-threaded process, makes itself a child subreaper
and starts ARGV through ``sandbox.spawn``, then exits as the session did. Killing it (the agent's
time limit) kills the namespace's init and with it every process of the session.

Where a session cannot be confined (no user namespaces, a container without the rights), an agent
is refused in one line unless ``APEX_AGENT_UNCONFINED=1`` says to run it as before, with the
user's rights (``unconfined``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from apex_core.errors import AgentUnavailableError, ApexUserError
from apex_core.grader import sandbox

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
"""Apex's repository (or the site-packages holding an installed Apex)."""
UNCONFINED_ENV = "APEX_AGENT_UNCONFINED"
REPOSITORY_ENTRIES = (
    "apex_core", "servers", "docs", "skills", "docs_index", "third_party", "tools",
    "README.md", "AGENTS.md", "CLAUDE.md", "pyproject.toml", ".claude", ".agents",
)
"""What an agent may read of Apex's repository: the sources and documentation of the game. Every
other entry, present or future, stays out of its sight."""
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")
"""Files a host needs to reach its API; where one is a link out of /etc (systemd-resolved's
``/run/systemd/resolve/stub-resolv.conf``), the file it names is shown too."""
SITE_FOLDERS = ("site-packages", "dist-packages")
PATH_VARIABLES = ("APEX_TASK_DIRS", "APEX_SOURCE_CHECKOUTS", "APEX_DOCS_INDEX")
"""Apex settings naming folders the servers an agent starts read: shown read-only."""
SOURCE_CACHE_ENV = "APEX_SOURCE_CACHE_DIR"
"""Where the source index is cached (``apex_core.sources.index``): only its ``sources`` folder is
shown, never the signing key that may sit beside it in Apex's cache."""
CACHE_VARIABLES = ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR")
"""Compiler caches the user may have placed anywhere: moved into the session's home."""
SESSION_DEVICES = ("/dev/tty",)
"""Devices a session needs beyond a worker's: Codex's sandbox (bubblewrap) binds /dev/tty into
the view it makes for each command, and fails without it."""
TMP_BYTES = 2 * 1024**3
"""Size cap of a session's private /tmp and /dev/shm each (TMPDIR is in its home, on disk)."""


@dataclass(frozen=True)
class HostState:
    """Where a host CLI keeps its login and settings, as far as a session needs copies of them.

    Copies, never the files: a session that could write the user's own settings could leave a hook
    or an MCP server there that the user's next session, unconfined, would run.
    """

    variable: str | None
    """The environment variable that moves the folder (``CODEX_HOME``), if the host has one."""
    folder: str
    """The folder's place in the home folder when the variable is not set."""
    files: tuple[str, ...]
    home_files: tuple[str, ...] = ()
    """Files the host keeps directly in the home folder."""


HOST_STATE: dict[str, HostState] = {
    "claude": HostState("CLAUDE_CONFIG_DIR", ".claude", (".credentials.json", "settings.json", ".claude.json"),
                        (".claude.json",)),
    "codex": HostState("CODEX_HOME", ".codex", ("auth.json", "config.toml")),
    # From Cursor's documentation, not seen on a real Cursor: its CLI cannot be installed here.
    "cursor": HostState(None, ".cursor", ("cli-config.json",), (".config/cursor/auth.json",)),
}


def unconfined() -> bool:
    """Whether the user asked for agents to run with their own rights (``APEX_AGENT_UNCONFINED=1``)."""
    value = os.environ.get(UNCONFINED_ENV, "")
    if value not in ("", "0", "1"):
        raise ApexUserError(f"{UNCONFINED_ENV} must be 1 (run agents unconfined) or 0, not {value!r}")
    return value == "1"


def require() -> None:
    """Refuse, in one line, where an agent's session cannot be confined and the user did not opt out."""
    if unconfined():
        return
    problem = confinement_problem()
    if problem is not None:
        raise AgentUnavailableError(
            f"refusing to start the agent: its session cannot be confined on this machine ({problem}); "
            f"set {UNCONFINED_ENV}=1 to run it with your own rights")


@functools.lru_cache(maxsize=1)
def confinement_problem() -> str | None:
    """Why a session cannot be confined here (one line), or None when it can; found once per
    process by starting ``true`` in a session's namespaces and view."""
    true = shutil.which("true") or "/bin/true"
    with Session("probe", []) as session:
        try:
            done = subprocess.run(session.command([true], session.home), cwd=session.home, env=session.env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            return f"the confined probe did not run: {error}"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("apex: ") if lines else f"the confined probe exited {done.returncode}"


class Session:
    """One session's private home, and the command line and environment that run a host in it.

    Use as a context manager: the home (and everything the session wrote there) is removed on exit.
    ``writable`` are the folders the agent may write besides its home (its solution's folder).
    """

    def __init__(self, host: str, writable: Iterable[Path]) -> None:
        self.host = host
        self.confined = not unconfined()
        self.writable = [Path(p).resolve() for p in writable]
        source = dict(os.environ)
        self.home = Path(tempfile.mkdtemp(prefix=f"apex-agent-{host}-")).resolve()
        try:
            for path in self.writable:
                _check_writable(path, source)
            self.env = self._environment(source) if self.confined else source
        except BaseException:
            shutil.rmtree(self.home, ignore_errors=True)
            raise

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        shutil.rmtree(self.home, ignore_errors=True)

    def _environment(self, source: dict[str, str]) -> dict[str, str]:
        """The user's environment with every per-user folder moved into the session's home, and
        copies of the host's login and settings there."""
        env = dict(source)
        home = self.home
        for name, relative in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"),
                               ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"), ("TMPDIR", "tmp")):
            (home / relative).mkdir(parents=True, exist_ok=True)
            env[name] = str(home / relative)
        env["HOME"] = str(home)
        env["APEX_CACHE_DIR"] = str(home / ".cache" / "apex")  # the session's grader: never the user's signing key
        for name in CACHE_VARIABLES:
            if name in env:
                env[name] = str(home / ".cache" / name.lower())
        env[SOURCE_CACHE_ENV] = str(source_cache_dir(source))  # the user's built index, shown read-only
        state = HOST_STATE.get(self.host)
        if state is not None:
            _copy_state(state, source, home, env)
        return env

    def command(self, argv: list[str], cwd: Path) -> list[str]:
        """``argv`` as it runs confined with ``cwd`` as its working folder (unchanged when unconfined)."""
        if not self.confined:
            return list(argv)
        found = shutil.which(argv[0], path=self.env.get("PATH"))
        if found is None:
            raise AgentUnavailableError(f"'{argv[0]}' is not on PATH, or not executable")
        # Run by the name it was found under (a venv's python is a link that must stay one).
        executable = os.path.abspath(found)
        node = shutil.which("node", path=self.env.get("PATH"))
        programs = [executable, *([os.path.abspath(node)] if node else [])]
        view = session_view(self.home, self.writable, programs, self.env)
        folder = os.path.realpath(cwd)
        if not _visible(folder, view):
            view.read_only.append(_working_folder(folder))
        config = {"view": dataclasses.asdict(view), "cwd": folder}
        return [sys.executable, "-s", "-m", "apex_core.agents.confine", json.dumps(config), "--", executable, *argv[1:]]


def _visible(folder: str, view: sandbox.View) -> bool:
    """Whether ``folder`` exists in ``view``: shown, inside something shown, or on the way to it
    (a folder the view makes so that what is shown below it has a place)."""
    for path in (os.path.realpath(p) for p in [*view.read_only, *view.writable]):
        if folder == path or _within(path, folder) or _within(folder, path):
            return True
    return False


def _working_folder(folder: str) -> str:
    """A working folder the view would not hold (the user's project, where ``apex eval`` runs
    with its output elsewhere), shown read-only unless it would show too much."""
    repository = os.path.realpath(PACKAGE_PARENT)
    if folder == repository or _within(repository, folder) or _within(folder, repository):
        raise AgentUnavailableError(f"the agent's working folder {folder} holds parts of Apex's repository an agent may not "
                                    "see; run it from the repository's root or a folder of its own")
    if _too_wide(folder):
        raise AgentUnavailableError(f"the agent's working folder {folder} would show a home folder, /tmp or the root "
                                    "whole; run it from a project folder")
    return folder


def source_cache_dir(environ: Mapping[str, str]) -> Path:
    """Where the source index is cached, as ``apex_core.sources.index.source_cache_dir`` finds it
    (restated: importing the source index takes seconds, and every session needs this)."""
    chosen = environ.get(SOURCE_CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser().resolve()
    from apex_core.grader import default_cache_dir

    return default_cache_dir().resolve()


def _copy_state(state: HostState, source: Mapping[str, str], home: Path, env: dict[str, str]) -> None:
    """Copy the host's login and settings from where ``source`` (the user's environment) keeps them
    into the session's ``home``, and point the host's variable there when the user had set it."""
    user_home = Path(source.get("HOME") or Path.home())
    moved = state.variable is not None and bool(source.get(state.variable))
    folder = Path(source[state.variable]) if moved and state.variable else user_home / state.folder
    copies = [(folder / name, home / state.folder / name) for name in state.files]
    copies += [(user_home / name, home / name) for name in state.home_files]
    for original, copy in copies:
        if original.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(original, copy)
            copy.chmod(0o600)
    (home / state.folder).mkdir(parents=True, exist_ok=True)
    if moved and state.variable:
        env[state.variable] = str(home / state.folder)


def _check_writable(path: Path, environ: Mapping[str, str]) -> None:
    """Refuse a writable folder that would open more than a task's folder to the agent."""
    real = os.path.realpath(path)
    guarded = {"/": "the root", os.path.realpath(PACKAGE_PARENT): "Apex's repository",
               os.path.realpath(sys.prefix): "the Python environment"}
    for home in {environ.get("HOME", ""), os.path.expanduser("~")}:
        if home and os.path.isabs(home):
            guarded[os.path.realpath(home)] = "a home folder"
    for place, what in guarded.items():
        if real == place or _within(real, place):
            raise AgentUnavailableError(f"the agent's writable folder {path} would hold {what}; give its solution a folder "
                                        "of its own (output/<task_id>/)")
    if not os.path.isdir(real):
        raise AgentUnavailableError(f"the agent's writable folder {path} is not a folder")


def _within(parent: str, path: str) -> bool:
    """Whether ``parent`` is a proper ancestor of ``path`` (absolute, normalized paths)."""
    return path.startswith(parent.rstrip("/") + "/")


def _too_wide(folder: str) -> bool:
    """Whether showing ``folder`` would show a whole home folder, /tmp, a kernel file system or
    the root (it is one of them, or holds one)."""
    places = ["/", "/tmp", "/var/tmp", "/proc", "/sys", "/dev", "/run"]
    places += [os.path.realpath(h) for h in {os.environ.get("HOME", ""), os.path.expanduser("~")} if h and os.path.isabs(h)]
    return any(folder == place or _within(folder, place) for place in places)


def installation(program: str) -> str:
    """The folder a host's program needs with it: the outermost ``node_modules`` folder holding
    it (an npm package finds its platform binary in a sibling package), else its own folder."""
    parts = Path(program).parts
    if "node_modules" in parts:
        return str(Path(*parts[: parts.index("node_modules") + 1]))
    return os.path.dirname(program)


def session_view(home: Path, writable: Iterable[Path], programs: Iterable[str], environ: Mapping[str, str],
                 tmp_bytes: int = TMP_BYTES) -> sandbox.View:
    """The file system a session sees (see the module's docstring)."""
    repository = os.path.realpath(PACKAGE_PARENT)
    base = sandbox.worker_view(str(home), PACKAGE_PARENT, [str(p) for p in writable], tmp_bytes)
    allowed = [os.path.join(repository, entry) for entry in REPOSITORY_ENTRIES]
    allowed += [os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix)]
    # Site-packages folders on the path, wherever they lie (a venv layered on another's through a
    # .pth: the test suite's per-worker environments); never other path entries, which may be the
    # repository itself (an editable install puts it on sys.path).
    allowed += [os.path.realpath(p) for p in sys.path if os.path.basename(p.rstrip(os.sep)) in SITE_FOLDERS and os.path.isdir(p)]

    def shown(path: str) -> bool:
        real = os.path.realpath(path)
        if real == repository or _within(repository, real):  # inside the repository: only what is allowed
            return any(real == a or _within(a, real) for a in allowed)
        return not _within(real, repository)  # never a folder above the repository (it would show all of it)

    read_only = [p for p in base.read_only if shown(p)]
    read_only += [p for p in allowed[: len(REPOSITORY_ENTRIES)] if os.path.lexists(p)]
    for program in programs:
        folder = installation(os.path.realpath(program))
        if _too_wide(folder):
            raise AgentUnavailableError(f"the agent's program {program} lies directly in {folder}, which a confined session "
                                        "cannot show whole; install it in a folder of its own")
        read_only += [program, folder]  # the program's own path too: the links on the way to it are made again
    for name in NETWORK_FILES:
        if os.path.exists(name):
            read_only.append(os.path.realpath(name))
    for name in PATH_VARIABLES:
        read_only.extend(p for p in environ.get(name, "").split(os.pathsep) if p and os.path.isabs(p) and os.path.exists(p)
                         and shown(p) and not _too_wide(os.path.realpath(p)))
    index = environ.get(SOURCE_CACHE_ENV)
    if index and os.path.isdir(os.path.join(index, "sources")):
        read_only.append(os.path.join(index, "sources"))  # the index only: never the cache's signing key beside it
    devices = [*base.devices, *(d for d in SESSION_DEVICES if os.path.exists(d))]
    return sandbox.View(read_only=_unique(read_only), writable=base.writable, devices=_unique(devices), tmp_bytes=tmp_bytes,
                        session=True)


def _unique(paths: list[str]) -> list[str]:
    seen: set[str] = set()
    return [p for p in paths if not (p in seen or seen.add(p))]


def main(argv: list[str]) -> int:
    """The launcher: ``python -m apex_core.agents.confine CONFIG -- ARGV``."""
    from apex_core.grader import become_subreaper

    config = json.loads(argv[1])
    command = argv[argv.index("--") + 1:]
    become_subreaper()
    try:
        init = sandbox.spawn(command, (), lambda: None, sandbox.View(**config["view"]), config["cwd"])
    except (sandbox.SandboxError, OSError) as error:
        print(f"apex: the agent's session could not be confined: {error}", file=sys.stderr, flush=True)
        return sandbox.SETUP_FAILED_EXIT

    # A handle on the init itself: a pid alone could name another process once the init is collected.
    handle = os.pidfd_open(init) if hasattr(os, "pidfd_open") else None

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, stop)
    try:
        return _wait(init)
    except _Stopped as stopped:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        with contextlib.suppress(ProcessLookupError):
            if handle is not None:
                signal.pidfd_send_signal(handle, signal.SIGKILL)
            else:
                os.kill(init, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            _wait(init)  # the kernel reaps a namespace's init only once every process in it is gone
        return 128 + stopped.signum


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _wait(init: int) -> int:
    """Collect children until the session's init ends; its exit code (a signal N as 128 + N)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return sandbox.SETUP_FAILED_EXIT
        if pid == init:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
