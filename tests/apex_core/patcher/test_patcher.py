"""The patcher changes site-packages files only under its journal and gives every byte back:
applied, committed, rolled back alone, restored, refused when it may not write, and recovered
after a kill -9 at every step of apply and restore (then any apex command restores)."""

from __future__ import annotations

import os
import py_compile
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from apex_core.errors import ApexUserError
from apex_core.patcher import Patcher, recover, restore, status
from apex_core.patcher.faults import FAULT_ENV, POINTS
from apex_core.patcher.journal import STATE_DIR_ENV

REPO_ROOT = Path(__file__).resolve().parents[3]


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file and folder under ``root``: (sha256 or 'dir', mode, mtime_ns), stray temporaries included."""
    import hashlib

    found = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[str(path.relative_to(root))] = (digest, stat.st_mode, stat.st_mtime_ns)
    return found


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A small site-packages: a package with two modules, one with compiled bytecode."""
    root = tmp_path / "site-packages"
    package = root / "toystack"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "norm.py").write_text("def rms_norm(x):\n    return x\n")
    (package / "rope.py").write_text("def rope(x):\n    return x\n")
    py_compile.compile(str(package / "norm.py"), cfile=str(package / "__pycache__" / f"norm.{sys.implementation.cache_tag}.pyc"))
    os.chmod(package / "rope.py", 0o640)
    return root


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _patcher(site: Path, cache: Path, tmp_path: Path) -> Patcher:
    return Patcher(tmp_path / "results", roots=[site], cache_dir=cache)


def test_applied_patches_stay_until_restored_and_then_every_byte_mode_and_mtime_is_back(site, cache, tmp_path):
    before = snapshot(site)
    norm, rope = site / "toystack" / "norm.py", site / "toystack" / "rope.py"
    with _patcher(site, cache, tmp_path) as patcher:
        patch = patcher.begin(task_id="toy__rms_norm", solution="solution.py")
        patcher.replace(patch, {norm: b"def rms_norm(x):\n    return 2 * x\n", rope: b"def rope(x):\n    return -x\n"})
        patcher.commit(patch)
    assert norm.read_text().endswith("2 * x\n") and oct(rope.stat().st_mode & 0o777) == "0o640"
    assert not list((site / "toystack" / "__pycache__").glob("norm.*.pyc")), "stale bytecode must not run"
    journal = status(cache)
    assert journal is not None and [p.state for p in journal.patches] == ["applied"]
    report = restore(cache)
    assert report is not None and report.files_restored == 3  # two sources and one bytecode file
    assert snapshot(site) == before and status(cache) is None


def test_a_failed_patch_is_rolled_back_alone_and_the_others_kept(site, cache, tmp_path):
    before = snapshot(site)
    with _patcher(site, cache, tmp_path) as patcher:
        good = patcher.begin(task_id="toy__rope")
        patcher.replace(good, {site / "toystack" / "rope.py": b"def rope(x):\n    return -x\n"})
        patcher.commit(good)
        bad = patcher.begin(task_id="toy__rms_norm")
        patcher.replace(bad, {site / "toystack" / "norm.py": b"import nothing_here\n"})
        patcher.roll_back(bad, "import failed: No module named 'nothing_here'")
    after = snapshot(site)
    assert after["toystack/norm.py"] == before["toystack/norm.py"]
    assert after["toystack/rope.py"] != before["toystack/rope.py"]
    journal = status(cache)
    assert {p.id: p.state for p in journal.patches} == {good: "applied", bad: "restored"}
    assert "nothing_here" in journal.patch(bad).note
    restore(cache)
    assert snapshot(site) == before


def test_a_patch_left_uncommitted_is_rolled_back_when_the_session_ends(site, cache, tmp_path):
    before = snapshot(site)
    with _patcher(site, cache, tmp_path) as patcher:
        patch = patcher.begin()
        patcher.replace(patch, {site / "toystack" / "norm.py": b"x = 1\n"})
    assert snapshot(site) == before and status(cache) is None


def test_a_second_patcher_is_refused_while_one_holds_the_environment(site, cache, tmp_path):
    with _patcher(site, cache, tmp_path):
        with pytest.raises(ApexUserError, match=rf"process {os.getpid()} .* is patching this Python environment"):
            _patcher(site, cache, tmp_path).open()
        assert recover(cache) == [], "a live owner's journal is not recovered under it"


def test_files_outside_site_packages_are_refused_and_nothing_changes(site, cache, tmp_path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    before = snapshot(site)
    with _patcher(site, cache, tmp_path) as patcher:
        patch = patcher.begin()
        with pytest.raises(ApexUserError, match="outside the environment's site-packages"):
            patcher.replace(patch, {site / "toystack" / "norm.py": b"y = 2\n", outside: b"x = 2\n"})
    assert snapshot(site) == before and outside.read_text() == "x = 1\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give the folder to another user")
def test_a_site_packages_owned_by_another_user_is_refused_as_root(site, cache, tmp_path):
    os.chown(site / "toystack", 12345, 12345)
    before = snapshot(site)
    with _patcher(site, cache, tmp_path) as patcher:
        patch = patcher.begin()
        with pytest.raises(ApexUserError, match="belongs to user id 12345"):
            patcher.replace(patch, {site / "toystack" / "norm.py": b"y = 2\n"})
    assert snapshot(site) == before


READ_ONLY = textwrap.dedent("""
    import sys
    from pathlib import Path
    from apex_core.errors import ApexUserError
    from apex_core.patcher import Patcher
    site, results, state = (Path(a) for a in sys.argv[1:4])
    with Patcher(results, roots=[site], cache_dir=state) as patcher:
        patch = patcher.begin()
        try:
            patcher.replace(patch, {site / "toystack" / "norm.py": b"y = 2\\n"})
        except ApexUserError as error:
            print("refused:", error)
""")


def test_a_read_only_site_packages_is_refused_and_nothing_changes_for_a_user_who_is_not_root(tmp_path):
    """Root writes read-only folders, so as root the check runs as the unprivileged user nobody."""
    as_root = os.geteuid() == 0
    if as_root and not Path("/usr/bin/setpriv").exists():
        pytest.skip("running as root without setpriv: no unprivileged user to run the check as")
    top = Path(tempfile.mkdtemp(prefix="apex-readonly-", dir="/tmp" if as_root else None))  # outside root's private tmp
    try:
        os.chmod(top, 0o755)
        root = top / "site-packages"
        (root / "toystack").mkdir(parents=True)
        (root / "toystack" / "norm.py").write_text("def rms_norm(x):\n    return x\n")
        for folder in (top / "results", top / "state"):
            folder.mkdir()
        if as_root:
            for path in (top, root, root / "toystack", root / "toystack" / "norm.py", top / "results", top / "state"):
                os.chown(path, 65534, 65534)
        os.chmod(root / "toystack", 0o555)
        before = snapshot(root)
        prefix = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []
        done = subprocess.run([*prefix, sys.executable, "-c", READ_ONLY, str(root), str(top / "results"), str(top / "state")],
                              capture_output=True, text=True, timeout=120, check=False, cwd=top,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HOME": str(top)})
        assert done.returncode == 0, done.stderr[-1500:]
        assert done.stdout.startswith("refused:") and "cannot be written" in done.stdout, done.stdout
        assert snapshot(root) == before
    finally:
        os.chmod(top / "site-packages" / "toystack", 0o755)
        shutil.rmtree(top, ignore_errors=True)


# --- kill -9 at every step ------------------------------------------------------------------------

APPLY = textwrap.dedent("""
    import sys
    from pathlib import Path
    from apex_core.patcher import Patcher
    site, results = Path(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    for _ in range(rounds):
        with Patcher(results, roots=[site]) as patcher:
            patch = patcher.begin(task_id="toy__rms_norm")
            patcher.replace(patch, {site / "toystack" / "norm.py": b"def rms_norm(x):\\n    return 3 * x\\n",
                                    site / "toystack" / "rope.py": b"def rope(x):\\n    return 0\\n"})
            patcher.commit(patch)
        if rounds > 1:
            from apex_core.patcher import restore
            restore()
""")
RESTORE = "from apex_core.patcher import restore\nrestore()\n"


def _python(code: str, *args: str, env: dict[str, str], fault: str | None = None) -> subprocess.CompletedProcess[str]:
    full = {**env, **({FAULT_ENV: fault} if fault else {})}
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True, text=True, timeout=120, check=False)


def _apex(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "apex_core.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO_ROOT)


@pytest.fixture
def env(cache: Path) -> dict[str, str]:
    return {**os.environ, "APEX_CACHE_DIR": str(cache), STATE_DIR_ENV: str(cache / "patches"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))}


@pytest.mark.parametrize("point", [p for p in POINTS if p.startswith("apply:")])
def test_a_kill_at_any_step_of_apply_is_undone_by_the_next_apex_command(point, site, env, tmp_path):
    before = snapshot(site)
    killed = _python(APPLY, str(site), str(tmp_path / "results"), env=env, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _apex("patch", "status", env=env)  # any command: recovery runs first
    assert snapshot(site) == before


@pytest.mark.parametrize("point", [p for p in POINTS if p.startswith("restore:")])
def test_a_kill_at_any_step_of_restore_is_finished_by_the_next_apex_command(point, site, env, tmp_path):
    before = snapshot(site)
    applied = _python(APPLY, str(site), str(tmp_path / "results"), env=env)
    assert applied.returncode == 0, applied.stderr
    assert snapshot(site) != before
    killed = _python(RESTORE, env=env, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _apex("patch", "status", env=env)
    assert snapshot(site) == before
    assert "nothing is patched" in _apex("patch", "status", env=env).stdout


def test_kills_at_random_times_during_repeated_patching_leave_nothing_behind(site, env, tmp_path):
    import random

    before = snapshot(site)
    chooser = random.Random(20261201)
    for _ in range(4):
        process = subprocess.Popen([sys.executable, "-c", APPLY, str(site), str(tmp_path / "results"), "400"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            process.wait(timeout=0.4 + chooser.random() * 1.2)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
        _apex("patch", "status", env=env)
        restored = _apex("patch", "restore", env=env)
        assert restored.returncode == 0, restored.stderr
        assert snapshot(site) == before


def test_a_second_apex_run_is_refused_while_a_session_holds_the_lock(site, env, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from apex_core.patcher import Patcher
        with Patcher(Path(sys.argv[2]), roots=[Path(sys.argv[1])]):
            print("held", flush=True)
            time.sleep(60)
    """), str(site), str(tmp_path / "results")], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = _apex("patch", "restore", env=env)
        assert refused.returncode == 2 and f"process {holder.pid}" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        holder.kill()
        holder.wait()
