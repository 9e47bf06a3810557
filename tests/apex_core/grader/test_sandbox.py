"""Solutions that reach for what a confined worker must not have (sandbox.py), each denied.

Every attack runs at the solution's first call. What the kernel answers propagates as the
solution's own exception, so the verdict is runtime_error and its reason shows the denial; an
attack that worked would put LEAKED (or WROTE) in the reason, or leave a file behind. Run as root
(the sandbox user, no user namespace) and, by the last test, as an ordinary user (a user
namespace of the judge's own).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from apex_core.grader import GradeOptions, default_cache_dir, grade
from apex_core.grader.isolation import sandbox
from apex_core.grader.isolation.reaper import descendants
from apex_core.grader import Outcome
from apex_core.tasks import get_task

REPO_ROOT = Path(__file__).resolve().parents[3]
PYTHONPATH = os.pathsep.join([str(REPO_ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
"""For judges the tests start: the repository, and whatever else this run's Python was given."""
CANNED = REPO_ROOT / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
CHECK_ONLY = GradeOptions(timing=False, timeout_s=30)
PREAMBLE = textwrap.dedent(
    """
    import numpy as np
    import os, signal, socket, sys, time

    def _correct(x, weight, eps):
        ms = (x.astype(np.float64) ** 2).mean(-1, keepdims=True)
        return (x / np.sqrt(ms + eps) * weight).astype(np.float32)

    # Spelled so that the line the verdict quotes never holds the words themselves.
    _PRIZE = "".join(["LEA", "KED"])
    _DONE = "".join(["WRO", "TE"])
    """
)


@pytest.fixture
def task():
    return get_task("cpu-mini__rms_norm")


def attack(body: str) -> str:
    """A solution that runs ``body`` at its first call and is otherwise correct."""
    inner = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return PREAMBLE + f"\ndef rms_norm(x, weight, eps):\n{inner}\n    return _correct(x, weight, eps)\n"


def graded(task, tmp_path: Path, body: str, options: GradeOptions = CHECK_ONLY):
    path = tmp_path / "solution.py"
    path.write_text(attack(body))
    return grade(task, path, options)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_file_in_the_users_home_is_not_in_the_solutions_view(task, tmp_path):
    secret = Path.home() / f".apex-red-team-{secrets.token_hex(4)}"
    secret.write_text("the user's key")
    try:
        result = graded(task, tmp_path, f"raise RuntimeError(_PRIZE + open({str(secret)!r}).read())")
    finally:
        secret.unlink()
    assert result.outcome is Outcome.runtime_error
    assert "LEAKED" not in result.reason
    assert "No such file or directory" in result.reason


def test_no_other_process_is_visible_and_the_judges_environment_cannot_be_read(apex_cli, tmp_path):
    token = secrets.token_hex(8)
    solution = tmp_path / "solution.py"
    solution.write_text(
        attack(
            f"""
            pids = sorted(p for p in os.listdir('/proc') if p.isdigit())
            for pid in pids:
                try:
                    if {token!r}.encode() in open('/proc/' + pid + '/environ', 'rb').read():
                        raise RuntimeError(_PRIZE + ' from ' + pid)
                except OSError:
                    pass
            raise RuntimeError('saw pids ' + ' '.join(pids))
            """
        )
    )
    # The judge is a process of its own whose environment (as it started) holds the token.
    done = apex_cli(
        "grade", "--task", "cpu-mini__rms_norm", "--solution", str(solution), "--no-timing", "--no-cache", "--json",
        env={"APEX_RED_TEAM_SECRET": token},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)[0]
    assert result["outcome"] == "runtime_error"
    assert "LEAKED" not in result["reason"]
    assert "saw pids 1 2" in result["reason"]  # its namespace's init and the worker: nothing else


def test_no_connection_reaches_a_socket_listening_on_the_judges_loopback(task, tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        body = f"""
        socket.create_connection(('127.0.0.1', {port}), timeout=5)
        raise RuntimeError(_PRIZE + ': connected')
        """
        result = graded(task, tmp_path, body)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.outcome is Outcome.runtime_error
    assert "LEAKED" not in result.reason
    assert "Connection refused" in result.reason


def test_the_grade_cache_is_out_of_the_solutions_reach(task, tmp_path):
    name = f"forged-{secrets.token_hex(4)}.json"
    targets = [default_cache_dir() / "grades" / "ff" / name, Path.home() / ".cache" / "apex" / "grades" / "ff" / name]
    body = f"""
    denials = []
    for label, target in zip(['configured', 'home'], {[str(t) for t in targets]!r}):
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, 'w').write('{{"outcome": "ok"}}')
            denials.append(label + ' ' + _DONE)
        except OSError as error:
            denials.append(label + ' errno ' + str(error.errno))
    raise RuntimeError(' | '.join(denials))
    """
    try:
        result = graded(task, tmp_path, body)
        assert result.outcome is Outcome.runtime_error
        # The home one is refused (the home is not in the view, whose root is read-only); the
        # configured one (under /tmp in the tests) lands, if anywhere, in the solution's private
        # /tmp: neither reaches the judge's cache.
        assert "home errno 30" in result.reason, result.reason
        assert not any(t.exists() for t in targets)
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


def test_killing_its_parent_or_the_judge_reaches_nothing(task, tmp_path):
    body = f"""
    results = []
    for name, pid in [('parent', os.getppid()), ('init', 1), ('judge', {os.getpid()})]:
        try:
            os.kill(pid, signal.SIGKILL)
            results.append(name + ' signalled')
        except OSError as error:
            results.append(name + ' ' + type(error).__name__)
    raise RuntimeError(' | '.join(results))
    """
    result = graded(task, tmp_path, body)
    # The grading went on to the solution's own verdict: its parent (the namespace's init, which
    # the kernel shields from its namespace, and which is root where the solution is not) and the
    # judge (not in its namespace) were out of reach.
    assert result.outcome is Outcome.runtime_error
    assert "judge ProcessLookupError" in result.reason, result.reason
    assert "parent PermissionError" in result.reason or "parent signalled" in result.reason


def test_apex_servers_and_site_packages_are_read_only_to_a_solution(task, tmp_path):
    token = secrets.token_hex(4)
    site = Path(sysconfig.get_paths()["purelib"])
    protected = [REPO_ROOT / "servers" / "grader.py", REPO_ROOT / "apex_core" / "score.py", task.baseline_path]
    planted = [site / f"apex-red-team-{token}.pth", site / f"apex_red_team_{token}.py"]
    before = {path: path.read_bytes() for path in protected}
    body = f"""
    denials = []
    for target, mode in {[(str(p), "a") for p in protected] + [(str(p), "w") for p in planted]!r}:
        try:
            with open(target, mode) as handle:
                handle.write('\\nimport os\\n')
            denials.append(_DONE + ' ' + target)
        except OSError as error:
            denials.append(type(error).__name__ + ': ' + str(error))
    raise RuntimeError(' | '.join(denials))
    """
    try:
        result = graded(task, tmp_path, body)
        assert result.outcome is Outcome.runtime_error  # denied: nothing to undo, nothing tampered
        assert "WROTE" not in result.reason
        assert result.reason.count("[Errno ") == len(protected) + len(planted)
        assert all(path.read_bytes() == before[path] for path in protected)
        assert not any(path.exists() for path in planted)
    finally:
        for path, content in before.items():
            if path.read_bytes() != content:
                path.write_bytes(content)
        for path in planted:
            path.unlink(missing_ok=True)


def test_nothing_of_a_grading_outlives_a_judge_killed_with_sigkill(tmp_path):
    marker = f"{secrets.randbelow(10**6) + 10**6}.5"
    solution = tmp_path / "solution.py"
    solution.write_text(
        attack(
            f"""
            if os.fork() == 0:
                os.execv('/bin/sleep', ['sleep', {marker!r}])
            while True:
                pass
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    log = tmp_path / "judge.log"
    with open(log, "wb") as output:
        judge = subprocess.Popen(
            [sys.executable, "-m", "apex_core.cli.main", "grade", "--task", "cpu-mini__rms_norm", "--solution",
             str(solution), "--no-cache", "--json"],
            env=env, stdout=output, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        sleeper = None
        while sleeper is None and time.monotonic() < deadline and judge.poll() is None:
            below, _ = descendants(judge.pid)
            sleeper = next((p for p in below if _cmdline(p) == ["sleep", marker]), None)
            time.sleep(0.05)
        assert sleeper is not None, f"the solution never started its marker process: {log.read_text()[-2000:]}"
        below, _ = descendants(judge.pid)
        reaper = min(below)  # started first
        scratch = os.readlink(f"/proc/{reaper}/cwd")
    finally:
        judge.kill()
        judge.wait()
    time.sleep(1.0)
    assert [pid for pid in below if alive(pid)] == []
    deadline = time.monotonic() + 5
    while os.path.exists(scratch) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(scratch)  # the reaper removed the scratch directory on its way out


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


# --- an ordinary user as the judge --------------------------------------------------------------

_AS_UNPRIVILEGED = textwrap.dedent(
    """
    # Run argv[2:] as uid/gid 65534 in a mount namespace of its own where the directories that
    # block other users from the interpreter (e.g. /root) are replaced by a tmpfs holding only the
    # needed child, bound from the original. Nothing outside this process tree changes.
    # With "mask", /dev/null is bound over those files of /proc, as container runtimes do.
    import json, os, sys
    from apex_core.grader import sandbox as sb
    setup = json.loads(sys.argv[1])
    blocked, mask = setup["blocked"], setup.get("mask", [])
    if blocked or mask:
        sb.unshare(sb.CLONE_NEWNS)
        sb.mount(None, "/", None, sb.MS_REC | sb.MS_PRIVATE)
        for path in mask:
            sb.mount("/dev/null", path, None, sb.MS_BIND)
        for directory, children in blocked.items():
            fds = {child: os.open(os.path.join(directory, child), os.O_PATH) for child in children}
            sb.mount("tmpfs", directory, "tmpfs", 0, "mode=0755")
            for child, fd in fds.items():
                os.mkdir(os.path.join(directory, child))
                sb.mount(f"/proc/self/fd/{fd}", os.path.join(directory, child), None, sb.MS_BIND | sb.MS_REC)
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    os.execv(sys.argv[2], sys.argv[2:])
    """
)


def _blocked_directories() -> dict[str, list[str]]:
    """Directories on the way to the interpreter and the repository that others cannot enter,
    with the child on the way through each."""
    blocked: dict[str, list[str]] = {}
    for needed in {sys.base_prefix, sys.prefix, os.path.realpath(sys.executable), str(REPO_ROOT)}:
        path = Path(os.path.realpath(needed))
        for ancestor in reversed(path.parents):
            if not ancestor.stat().st_mode & 0o001:
                child = path.relative_to(ancestor).parts[0]
                blocked.setdefault(str(ancestor), [])
                if child not in blocked[str(ancestor)]:
                    blocked[str(ancestor)].append(child)
                break
    return blocked


_JUDGE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from apex_core.grader import GradeOptions, grade
    from apex_core.tasks import get_task
    task = get_task("cpu-mini__rms_norm")
    results = [grade(task, Path(p), GradeOptions(timing=False, timeout_s=30)) for p in sys.argv[1:]]
    print(json.dumps([{"outcome": r.outcome.value, "reason": r.reason} for r in results]))
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="already an ordinary user: every grading of this suite took that path")
def test_an_ordinary_user_as_the_judge_confines_its_solutions_too():
    work = Path(tempfile.mkdtemp(prefix="apex-unprivileged-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    try:
        home = work / "home"
        home.mkdir()
        (home / "secret").write_text("the user's key")
        token = secrets.token_hex(8)
        honest = work / "honest.py"
        honest.write_bytes(CANNED.read_bytes())
        hostile = work / "hostile.py"
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            port = server.getsockname()[1]
            hostile.write_text(
                attack(
                    f"""
                    results = []
                    attempts = [
                        ('home', lambda: open({str(home / 'secret')!r}).read()),
                        ('environ', lambda: [open('/proc/' + p + '/environ', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]),
                        ('socket', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5)),
                        ('cache', lambda: open({str(home / '.cache' / 'forged.json')!r}, 'w').write('x')),
                        ('apex', lambda: open({str(REPO_ROOT / 'apex_core' / 'score.py')!r}, 'a')),
                        ('kill', lambda: os.kill(1, signal.SIGKILL) or os.kill({os.getpid()}, signal.SIGKILL)),
                    ]
                    for label, attempt in attempts:
                        try:
                            found = str(attempt())
                            results.append(label + (' ' + _PRIZE if {token!r} in found or 'the user' in found else ' nothing'))
                        except OSError as error:
                            results.append(label + ' ' + type(error).__name__)
                    raise RuntimeError(' | '.join(results))
                    """
                )
            )
            for path in [work, home, home / "secret", honest, hostile]:
                os.chown(path, 65534, 65534)
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "APEX_CACHE_DIR": str(home / ".cache"),
                   "PYTHONPATH": PYTHONPATH, "APEX_RED_TEAM_SECRET": token}
            runner = [sys.executable, "-c", _AS_UNPRIVILEGED, json.dumps({"blocked": _blocked_directories()})]
            preflight = subprocess.run([*runner, sys.executable, "-c", "import numpy, apex_core.grader.judge"],
                                       env=env, cwd=work, capture_output=True, text=True, timeout=120)
            if preflight.returncode != 0:
                pytest.skip(f"uid 65534 cannot run this interpreter here: {preflight.stderr.strip().splitlines()[-1:]}")
            done = subprocess.run([*runner, sys.executable, "-c", _JUDGE, str(honest), str(hostile)],
                                  env=env, cwd=work, capture_output=True, text=True, timeout=300)
            server.setblocking(False)
            with pytest.raises(BlockingIOError):
                server.accept()
        assert done.returncode == 0, done.stderr[-3000:]
        honest_result, hostile_result = json.loads(done.stdout.strip().splitlines()[-1])
        assert honest_result["outcome"] == "ok", honest_result
        assert hostile_result["outcome"] == "runtime_error", hostile_result
        reason = hostile_result["reason"]
        assert "LEAKED" not in reason, reason
        # The judge's home and its grade cache absent, loopback refused, Apex's files not
        # writable (EACCES or EROFS), the judge's pid not found.
        for denial in ["home FileNotFoundError", "socket ConnectionRefusedError", "cache FileNotFoundError",
                       "kill ProcessLookupError"]:
            assert denial in reason, reason
        assert "apex PermissionError" in reason or "apex OSError" in reason, reason
        assert not (home / ".cache" / "forged.json").exists()
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_the_view_holds_apex_core_but_not_the_rest_of_the_repository(tmp_path, monkeypatch):
    # The reaper's path: the repository (PYTHONPATH) and the interpreter's own directories.
    own = [p for p in sys.path if p.startswith((sys.prefix, sys.base_prefix))]
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(REPO_ROOT), *own])
    view = sandbox.worker_view(str(tmp_path), REPO_ROOT)
    assert str(REPO_ROOT / "apex_core") in view.read_only
    assert str(REPO_ROOT) not in view.read_only and str(Path.home()) not in view.read_only
    for hidden in ("servers", "tests", "reference_solutions", ".git"):
        assert not any(p == str(REPO_ROOT / hidden) or p.startswith(str(REPO_ROOT / hidden) + "/") for p in view.read_only)
    assert view.writable == [str(tmp_path)]
    steps = sandbox.plan(view)
    targets = [s.target for s in steps]
    assert targets.index("/tmp") < targets.index(os.path.realpath(tmp_path))  # the private /tmp first


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build an unprivileged judge's world where confinement fails")
def test_where_no_solution_can_be_confined_grading_is_refused_in_one_line_unless_unconfined():
    # An ordinary user under a /proc that is partly hidden (as in a Docker container) cannot
    # mount a /proc of its own for a worker, so no worker can be confined there.
    mask = [p for p in ("/proc/kcore", "/proc/timer_list", "/proc/keys") if os.path.exists(p)][:1]
    if not mask:
        pytest.skip("none of /proc/kcore, /proc/timer_list, /proc/keys exists here to hide")
    work = Path(tempfile.mkdtemp(prefix="apex-unconfinable-"))
    try:
        solution = work / "solution.py"
        solution.write_bytes(CANNED.read_bytes())
        for path in (work, solution):
            os.chown(path, 65534, 65534)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "PYTHONPATH": PYTHONPATH}
        runner = [sys.executable, "-c", _AS_UNPRIVILEGED, json.dumps({"blocked": _blocked_directories(), "mask": mask})]
        command = [*runner, sys.executable, "-m", "apex_core.cli.main", "grade", "--task", "cpu-mini__rms_norm",
                   "--solution", str(solution), "--no-timing", "--json"]
        refused = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=300)
        assert refused.returncode == 2, refused.stderr[-2000:]
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("apex: error: refusing to grade: solutions cannot be confined")
        assert "/proc of its own" in lines[0] and "--unconfined" in lines[0] and refused.stdout == ""
        unconfined = subprocess.run([*command, "--unconfined"], env=env, cwd=work, capture_output=True, text=True,
                                    timeout=300)
        assert unconfined.returncode == 0, unconfined.stderr[-2000:]
        result = json.loads(unconfined.stdout)[0]
        assert result["outcome"] == "ok" and result["provenance"]["unconfined"] is True
        assert any(flag.startswith("unconfined:") for flag in result["flags"])
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_a_path_entry_that_would_show_the_home_or_tmp_is_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(REPO_ROOT), "/", "/tmp", str(Path.home()), str(tmp_path / "inside"), *sys.path])
    (tmp_path / "inside").mkdir()
    view = sandbox.worker_view(str(tmp_path), REPO_ROOT)
    for wide in ("/", "/tmp", str(Path.home()), str(tmp_path / "inside")):
        assert wide not in view.read_only


def test_a_confined_workers_compile_cache_copy_returns_its_new_regular_files_only(tmp_path):
    from apex_core.grader import WorkerProcess, WorkerSpec

    shared = tmp_path / "compile" / "abc"
    shared.mkdir(parents=True)
    (shared / "old.cubin").write_bytes(b"old")
    worker = WorkerProcess(WorkerSpec(library="numpy", device="cpu"), timeout_s=60)
    try:
        local = worker._local_copy(shared)
        assert local.parent == worker.scratch and (local / "old.cubin").read_bytes() == b"old"
        (local / "kernel").mkdir()
        (local / "kernel" / "new.cubin").write_bytes(b"new")
        (local / "escape").symlink_to("/etc/passwd")
        os.mkfifo(local / "pipe")
    finally:
        worker.close()
    assert (shared / "kernel" / "new.cubin").read_bytes() == b"new" and (shared / "old.cubin").read_bytes() == b"old"
    assert not (shared / "escape").exists() and not (shared / "escape").is_symlink() and not (shared / "pipe").exists()
