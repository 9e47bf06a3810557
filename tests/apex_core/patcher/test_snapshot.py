"""A patch session's snapshot of the whole environment (issue 28, class 1): whatever patched-in
code changed while it ran (a planted .pth, another package's module edited with its mtime set
back, bytecode planted behind an unchanged source, a file replaced or removed) is seen by status
and undone by restore, or reported with its exact way back; afterwards the environment is the same
byte for byte, mode and mtime, folders included. Each change is made by a real child process."""

from __future__ import annotations

import base64
import hashlib
import os
import py_compile
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apex_core.patcher import Patcher, RestoreError, environment_status, restore, status
from apex_core.patcher import quiet
from apex_core.patcher.snapshot import Snapshot, _Restorer, watched_folders

pytestmark = pytest.mark.site_packages  # patches transformers in this venv, or runs a model while tests do

TAG = sys.implementation.cache_tag


def tree(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``root`` and ``root`` itself: (sha256, 'dir' or the link's target, mode, mtime_ns)."""
    found = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        if path.is_symlink():
            what = f"-> {os.readlink(path)}"
        elif path.is_dir():
            what = "dir"
        else:
            what = hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = (what, info.st_mode, info.st_mtime_ns)
    return found


def _record(root: Path, name: str, files: list[str]) -> None:
    """A dist-info with RECORD hashes, as pip writes it."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
    rows = []
    for relative in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256((root / relative).read_bytes()).digest()).rstrip(b"=").decode()
        rows.append(f"{relative},sha256={digest},{(root / relative).stat().st_size}")
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site-packages: the stack a patch goes into, another package with bytecode, a .pth file."""
    root = tmp_path / "site-packages"
    stack, other = root / "toystack", root / "otherpkg"
    stack.mkdir(parents=True)
    other.mkdir()
    (stack / "__init__.py").write_text("")
    (stack / "norm.py").write_text("def rms_norm(x):\n    return x\n")
    (stack / "rope.py").write_text("def rope(x):\n    return x\n")
    (other / "__init__.py").write_text("")
    (other / "core.py").write_text("def answer():\n    return 1\n")
    (other / "util.py").write_text("def helper():\n    return 'original'\n")
    (other / "extra.py").write_text("EXTRA = True\n")
    py_compile.compile(str(other / "util.py"), cfile=str(other / "__pycache__" / f"util.{TAG}.pyc"))
    (root / "existing.pth").write_text("# an installed path file\n")
    _record(root, "toystack", ["toystack/__init__.py", "toystack/norm.py", "toystack/rope.py", "existing.pth"])
    _record(root, "otherpkg", ["otherpkg/__init__.py", "otherpkg/core.py", "otherpkg/util.py", "otherpkg/extra.py"])
    os.chmod(other / "core.py", 0o640)
    return root


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _patch_norm(site: Path, cache: Path, tmp_path: Path) -> None:
    """A solution patched in and kept (applied), as ``apex patch apply`` leaves it."""
    with Patcher(tmp_path / "results", roots=[site], cache_dir=cache) as patcher:
        patch = patcher.begin(task_id="toy__rms_norm")
        patcher.replace(patch, {site / "toystack" / "norm.py": b"def rms_norm(x):\n    return 2 * x\n"})
        patcher.commit(patch)


DAMAGE = textwrap.dedent("""
    # What a patched-in solution running with the user's rights did to the environment (issue 28).
    import importlib._bootstrap_external as bootstrap
    import os, sys
    site, tag = sys.argv[1], sys.argv[2]
    with open(os.path.join(site, "zz-planted.pth"), "w") as handle:                # runs at every Python start
        handle.write("import os; os.environ['PLANTED'] = '1'\\n")
    core = os.path.join(site, "otherpkg", "core.py")                                 # edited in place, same size,
    before = os.stat(core)                                                           # its mtime set back
    with open(core, "r+") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("return 1", "return 2"))
    os.utime(core, ns=(before.st_atime_ns, before.st_mtime_ns))
    rope = os.path.join(site, "toystack", "rope.py")                                 # bytecode behind an unchanged
    source = os.stat(rope)                                                           # source: its header matches
    code = compile("def rope(x):\\n    return 'planted'\\n", rope, "exec")          # rope.py's mtime and size
    os.makedirs(os.path.join(site, "toystack", "__pycache__"), exist_ok=True)
    with open(os.path.join(site, "toystack", "__pycache__", f"rope.{tag}.pyc"), "wb") as handle:
        handle.write(bootstrap._code_to_timestamp_pyc(code, int(source.st_mtime), source.st_size))
    util = os.path.join(site, "otherpkg", "util.py")                                 # replaced, as an editor or
    with open(util + ".new", "w") as handle:                                         # pip does (rename over)
        handle.write("def helper():\\n    return 'replaced'\\n")
    os.replace(util + ".new", util)
    os.unlink(os.path.join(site, "otherpkg", "extra.py"))                            # removed
""")


def _damage(site: Path) -> None:
    done = subprocess.run([sys.executable, "-c", DAMAGE, str(site), TAG], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def _rope_says(site: Path) -> str:
    """What ``toystack.rope.rope`` returns in a fresh interpreter (-B: it writes no bytecode)."""
    done = subprocess.run([sys.executable, "-B", "-c", "import toystack.rope as r; print(r.rope(1))"], capture_output=True,
                          text=True, timeout=60, check=False, env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_what_patched_code_changed_is_seen_by_status_undone_by_restore_or_reported_with_its_way_back(site, cache, tmp_path):
    before = tree(site)
    _patch_norm(site, cache, tmp_path)
    _damage(site)
    assert _rope_says(site) == "planted", "the planted bytecode really runs behind the unchanged source"

    shown = environment_status(cache, roots=[site])
    found = {Path(d.path).relative_to(site).as_posix(): d for d in shown.differences}
    assert set(found) == {"zz-planted.pth", "toystack/__pycache__", "otherpkg/core.py", "otherpkg/util.py",
                          "otherpkg/extra.py"}, found
    assert found["zz-planted.pth"].change == "new" and found["toystack/__pycache__"].change == "new"
    assert f"rope.{TAG}.pyc" in found["toystack/__pycache__"].detail
    assert found["otherpkg/core.py"].change == "changed" and "set back" in found["otherpkg/core.py"].detail
    assert not found["otherpkg/core.py"].restorable and "reinstall otherpkg 1.0" in found["otherpkg/core.py"].way_back
    assert found["otherpkg/util.py"].change == "replaced" and found["otherpkg/util.py"].restorable
    assert found["otherpkg/extra.py"].change == "removed" and found["otherpkg/extra.py"].restorable
    assert shown.patched and "toystack/norm.py" not in found, "the patch's own file is listed under the patch"

    # The edit in place cannot be undone (no copy holds core.py's bytes): restore undoes the rest and says so.
    with pytest.raises(RestoreError, match=r"1 change\(s\) could not be undone .*otherpkg/core.py.*reinstall otherpkg 1.0"):
        restore(cache, roots=[site])
    assert _rope_says(site) == "1", "the planted bytecode is gone"
    left = environment_status(cache, roots=[site])
    assert [Path(d.path).name for d in left.differences] == ["core.py"] and not left.patched
    assert {k: v for k, v in tree(site).items() if k != "otherpkg/core.py"} == \
        {k: v for k, v in before.items() if k != "otherpkg/core.py"}

    # The way back it named (a reinstall writes the package's bytes anew), then restore: all back.
    core = site / "otherpkg" / "core.py"
    (site / "otherpkg" / "core.py.reinstalled").write_text("def answer():\n    return 1\n")
    os.replace(site / "otherpkg" / "core.py.reinstalled", core)
    report = restore(cache, roots=[site])
    assert report is not None and status(cache, roots=[site]) is None
    assert tree(site) == before


def test_a_startup_file_edited_in_place_comes_back_from_its_copy(site, cache, tmp_path):
    before = tree(site)
    _patch_norm(site, cache, tmp_path)
    pth = site / "existing.pth"
    info = pth.stat()
    with pth.open("r+") as handle:  # same size, mtime set back
        handle.write("import os;os.system('x')#\n"[: info.st_size])
    os.utime(pth, ns=(info.st_atime_ns, info.st_mtime_ns))
    (found,) = environment_status(cache, roots=[site]).differences
    assert found.path == str(pth) and found.change == "changed" and found.restorable
    restore(cache, roots=[site])
    assert tree(site) == before


def test_no_bytecode_is_written_by_apex_or_its_children_while_a_session_is_open(site, cache, tmp_path, monkeypatch):
    monkeypatch.delenv(quiet.BYTECODE_ENV, raising=False)  # as a user's shell has it, whatever this one says
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    written = sys.dont_write_bytecode, os.environ.get(quiet.BYTECODE_ENV)
    _patch_norm(site, cache, tmp_path)
    assert sys.dont_write_bytecode and os.environ[quiet.BYTECODE_ENV] == "1"
    done = subprocess.run([sys.executable, "-c", "import toystack.rope"], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert not (site / "toystack" / "__pycache__").exists(), "a child of a session wrote bytecode into site-packages"
    assert environment_status(cache, roots=[site]).differences == []
    restore(cache, roots=[site])
    assert (sys.dont_write_bytecode, os.environ.get(quiet.BYTECODE_ENV)) == written


def test_a_new_folder_a_changed_mode_and_a_symlink_are_undone_and_folders_get_their_mtimes_back(site, cache, tmp_path):
    (site / "toystack" / "link.py").symlink_to("rope.py")
    before = tree(site)
    _patch_norm(site, cache, tmp_path)
    (site / "evilpkg" / "sub").mkdir(parents=True)
    (site / "evilpkg" / "sub" / "__init__.py").write_text("import os\n")
    os.chmod(site / "otherpkg" / "core.py", 0o777)
    (site / "toystack" / "link.py").unlink()
    (site / "toystack" / "link.py").symlink_to("/etc/passwd")
    changes = {Path(d.path).relative_to(site).as_posix(): d.change for d in environment_status(cache, roots=[site]).differences}
    assert changes == {"evilpkg": "new", "otherpkg/core.py": "metadata", "toystack/link.py": "changed"}, changes
    restore(cache, roots=[site])
    assert tree(site) == before


def test_on_the_real_site_packages_a_planted_pth_and_bytecode_are_seen_and_removed(tmp_path):
    """This interpreter's own site-packages and scripts. Other sessions may be running in this venv
    (a shared machine, a parallel test), so only what this test planted is restored."""
    folders = watched_folders()
    site = Path(folders[0].path)
    state = tmp_path / "state"  # beside the venv on the same file system here; links fall back to reporting elsewhere
    snapshot = Snapshot.take(state / "env.snapshot", folders, links=False)  # links would move ctimes another session watches
    name = f"zz_apex_test_{secrets.token_hex(4)}"
    pth, package = site / f"{name}.pth", site / name
    try:
        pth.write_text("# planted by apex's test; a comment line runs nothing\n")
        (package / "__pycache__").mkdir(parents=True)
        (package / "__pycache__" / f"mod.{TAG}.pyc").write_bytes(b"\0" * 16)
        mine = [p for p in snapshot.plan(folders) if name in str(p.path)]
        assert {(p.path, p.difference.change if p.difference else None, p.action) for p in mine} == \
            {(pth, "new", "remove"), (package, "new", "remove-tree")}
        outcome = _Restorer(snapshot, snapshot.usable_folders(folders), mine).run()
        assert not outcome.unrestorable and len(outcome.restored) == 2
        assert not pth.exists() and not package.exists()
        assert not [p for p in snapshot.plan(folders) if name in str(p.path)]
    finally:
        pth.unlink(missing_ok=True)
        if package.exists():
            import shutil

            shutil.rmtree(package)
        from apex_core.patcher.snapshot import discard

        discard(state / "env.snapshot")


def test_a_record_edited_to_vouch_for_an_edit_does_not(site, cache, tmp_path):
    """The RECORD a file is checked against is the one the session began with (its copy), not one
    the edit rewrote to match."""
    _patch_norm(site, cache, tmp_path)
    core, record = site / "otherpkg" / "core.py", site / "otherpkg-1.0.dist-info" / "RECORD"
    edited = b"def answer():\n    return 2\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(edited).digest()).rstrip(b"=").decode()
    for path, replace in ((core, lambda text: edited),
                          (record, lambda text: text.replace(text.split(b"otherpkg/core.py,sha256=")[1].split(b",")[0], digest.encode()))):
        info = path.stat()
        data = replace(path.read_bytes())
        with path.open("r+b") as handle:  # in place, the size kept, the mtime set back
            handle.write(data)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    found = {Path(d.path).name: d for d in environment_status(cache, roots=[site]).differences}
    assert found["core.py"].change == "changed" and not found["core.py"].restorable, found
    assert found["RECORD"].restorable, "the RECORD itself comes back from its copy"


def test_outside_a_session_a_startup_file_no_package_lists_is_reported(site):
    from apex_core.patcher.integrity import unaccounted_changes

    assert unaccounted_changes(None, [site]) == []
    (site / "zz-planted.pth").write_text("import os\n")
    (found,) = unaccounted_changes(None, [site])
    assert found.startswith(str(site / "zz-planted.pth")) and "no installed package lists it" in found


def _store(cache: Path) -> dict[str, int]:
    """The links' store of the toy environment's snapshot: name -> the inode it holds."""
    (store,) = (cache / "patches").glob("*.snapshot-links")
    return {p.name: p.stat().st_ino for p in store.rglob("*") if p.is_file()}


def _files(site: Path) -> dict[str, int]:
    return {str(p.stat().st_ino): p.stat().st_ino for p in site.rglob("*") if p.is_file() and not p.is_symlink()}


def test_the_links_outlive_their_session_and_the_next_snapshot_links_only_what_is_new(site, cache, tmp_path):
    """The store holds one link per file of the environment, named by its inode; a later session's
    snapshot writes no link for a file the store already holds (its ctime does not move) and
    unlinks the names of files gone since, so their bytes are freed."""
    _patch_norm(site, cache, tmp_path)
    restore(cache, roots=[site])
    assert _store(cache) == _files(site), "every file's link, kept after its session ended"
    core, extra = site / "otherpkg" / "core.py", site / "otherpkg" / "extra.py"
    gone = str(extra.stat().st_ino)
    extra.unlink()
    (site / "otherpkg" / "added.py").write_text("ADDED = 1\n")
    ctime = core.stat().st_ctime_ns
    before, held = tree(site), _files(site)
    _patch_norm(site, cache, tmp_path)
    assert core.stat().st_ctime_ns == ctime, "a file the store already held was linked again"
    assert _store(cache) == held and gone not in held, "the new file linked, the removed one's link gone"
    (site / "otherpkg" / "core.py.new").write_text("def answer():\n    return 3\n")
    os.replace(site / "otherpkg" / "core.py.new", core)  # replaced while the session is open
    restore(cache, roots=[site])
    assert tree(site) == before, "the original comes back from the link an earlier session made"


def test_a_name_in_the_store_that_holds_another_file_is_not_taken_for_the_files_link(site, cache, tmp_path):
    """Only the inode a name says is ever linked back: a stray file put under a file's inode
    number (by hand, or by code that reached the store) is replaced by the real link."""
    norm = site / "toystack" / "norm.py"
    _patch_norm(site, cache, tmp_path)
    restore(cache, roots=[site])
    original, inode = norm.read_bytes(), norm.stat().st_ino
    (store,) = (cache / "patches").glob("*.snapshot-links")
    (stray,) = store.rglob(str(inode))
    stray.unlink()
    stray.write_bytes(b"import os; os.system('planted')\n")
    util = site / "otherpkg" / "util.py"
    _patch_norm(site, cache, tmp_path)
    assert stray.stat().st_ino == inode and stray.read_bytes() == original, "the stray name now links the real file"
    (site / "otherpkg" / "util.py.new").write_text("def helper():\n    return 'replaced'\n")
    os.replace(site / "otherpkg" / "util.py.new", util)
    restore(cache, roots=[site])
    assert norm.read_bytes() == original and util.read_text() == "def helper():\n    return 'original'\n"


def test_two_names_of_one_file_share_its_link_and_each_comes_back(site, cache, tmp_path):
    """Hard-linked installs give one inode several names: the store holds it once, under its inode,
    and either name replaced during a session comes back as that inode."""
    util, twin = site / "otherpkg" / "util.py", site / "toystack" / "util_twin.py"
    os.link(util, twin)
    before = tree(site)
    _patch_norm(site, cache, tmp_path)
    assert str(util.stat().st_ino) in _store(cache)
    for name in (util, twin):
        name.with_suffix(".new").write_text("def helper():\n    return 'replaced'\n")
        os.replace(name.with_suffix(".new"), name)
    restore(cache, roots=[site])
    assert tree(site) == before and util.stat().st_ino == twin.stat().st_ino


def test_a_session_an_older_apex_began_keeps_its_links_inside_its_snapshot_and_still_restores(site, cache, tmp_path):
    """Format 1 (before the store): the links sat in the snapshot's own ``links/`` folder; a session
    open across the upgrade is still restored from them."""
    import shutil

    from apex_core.patcher.snapshot import LINKS, Snapshot, links_folder

    before = tree(site)
    _patch_norm(site, cache, tmp_path)
    (folder,) = (cache / "patches").glob("*.snapshot")
    shutil.move(links_folder(folder), folder / LINKS)  # as the older apex laid it out
    older = Snapshot.load(folder)
    older.header.format = 1
    older.save()
    util = site / "otherpkg" / "util.py"
    (site / "otherpkg" / "util.py.new").write_text("def helper():\n    return 'replaced'\n")
    os.replace(site / "otherpkg" / "util.py.new", util)
    restore(cache, roots=[site])
    assert tree(site) == before and not folder.exists()
