"""The whole environment as a patch session found it: restore returns exactly it, status reports
every difference from it, whoever made it.

Why (issue 28): the journal knows only the files the patcher wrote. Once a solution is patched
in, it runs, and code that runs can write anywhere its user can: a ``.pth`` in site-packages (run
at every interpreter start), another package's module edited with its mtime set back, bytecode
planted behind an unchanged source (Python runs a ``.pyc`` whose header matches the source's mtime
and size). A restore that undid only the journal left those in place and a status that read only
the journal called the environment clean. The snapshot makes the environment itself the record.

What it holds (``<state dir>/<environment>.snapshot/``, 0700, beside the journal's pointer):

- ``manifest.bin``: every entry (file, folder, symlink) under the watched folders, site-packages
  (purelib and platlib) and the venv's scripts folder, bytecode and ``.pth`` files included, with
  its type, mode, owner, size, mtime, ctime and inode; a symlink's target. Binary (a header in
  JSON, the paths, one array of integers): 50,000 entries are written in 0.08 s so, 0.2 s as JSON.
- the links (``<environment>.snapshot-links/``, 0700, beside the snapshot): a hard link to every
  regular file, named by its inode number. A link is the same inode, so it costs no bytes, and it
  keeps a file's original bytes when someone replaces the file (writes a new one and renames it
  over: what pip, editors, ``py_compile`` and our own patcher do) or deletes it. It does *not* keep
  them through an edit in place (``open(path, "w")``): that edits the linked inode too. The links
  outlive their session: the next session's snapshot links only the files that are new since (a
  name already holding the file's inode is that file's link), and unlinks the names of inodes no
  longer in the environment. A snapshot of the whole venv so costs a stat walk instead of 80,000
  ``link`` calls, and ending a session 80,000 ``unlink`` calls fewer; what it keeps in between is
  the bytes of files replaced since the last session (a package upgraded in between), until the
  next one begins. A link is only ever used for the inode it names (checked before every use).
  Snapshots of format 1 kept numbered links inside their own folder; they are still read.
- ``copies/``: a copy of each small file at the top of site-packages (``*.pth``, sitecustomize,
  one-module packages: the files Python runs at every start), so an edit in place there is undone;
  and of every distribution's RECORD, so the hashes a file is checked against are the ones listed
  when the session began (an edited RECORD would otherwise vouch for the edit it hides).

How a change is seen: a file whose inode or ctime moved changed, whatever its mtime says (only the
kernel sets ctime, and it moves on every write, chmod, utime and link). Whether its bytes changed
is then checked against what is known of them: the copy, the journal's sha256, or the sha256 its
distribution's RECORD lists (content hashes only where they are cheap: a handful of changed files,
never the whole environment).

What restore does, and what it only reports (``Plan.action``):

- a new file, symlink or folder is removed; a removed folder is made again;
- a removed or replaced file comes back as its original inode, from its link, once the link is
  checked (same inode, size and mtime, and the known sha256 where there is one);
- a file edited in place comes back from its copy where one was taken; one whose bytes still match
  what its package installed gets its mode and mtime back; edited bytecode is removed (Python
  compiles it again from its source);
- any other edit in place cannot be undone: it is reported with the exact way back, the
  distribution to reinstall (``pip install --force-reinstall --no-deps NAME==VERSION``), and the
  session stays open (status keeps reporting it) until the file's bytes match its RECORD again or
  the user says it is fixed (``apex patch restore --forget``);
- folders' modes and mtimes are put back last.

Folders outside site-packages that the stack runs from (an editable checkout of transformers) are
watched and reported, never restored: they are someone's working tree.

Cost: one stat walk of the watched folders plus a stat of each file's link (a link made only for a
file new since the last session), in two threads (the system calls release the GIL; on two cores
busy with other work they gained nothing, on a GPU host's many they may), the links spread over a
few folders. Measured figures are in docs/patching.md.
"""

from __future__ import annotations

import array
import datetime as dt
import errno
import hashlib
import os
import shutil
import stat as st
import struct
import sys
import sysconfig
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from apex_core.errors import ApexUserError
from apex_core.patcher.files import atomic_write, fsync_dir, sha256_file

FORMAT = 2
"""1: numbered links inside the snapshot's folder; 2: links named by inode in the store beside it."""
MAGIC = b"APEX-SNAPSHOT-1\n"
MANIFEST = "manifest.bin"
LINKS = "links"
COPIES = "copies"
BUCKETS = 64
"""Link folders: spread so that no folder grows large, few enough that removing them stays cheap
(each removal costs milliseconds on ext4: 256 folders took 0.4 s longer to discard than 64 here,
with no gain in taking them)."""
COPY_LIMIT = 1 << 20
"""Top-level files up to this size get a copy (site-packages' top level holds ~1 MB in all); every
RECORD does, whatever its size (a venv's RECORDs hold ~5 MB in all, torch's 1.5 MB)."""
WALK_THREADS = 2

FILE, FOLDER, SYMLINK, OTHER = 0, 1, 2, 3
_KIND_NAMES = {FILE: "file", FOLDER: "folder", SYMLINK: "symlink", OTHER: "special file"}
_INT64 = 1 << 63
COLUMNS = 10
"""Integers per entry in the manifest: folder, kind, mode, uid, size, mtime_ns, ctime_ns, inode, link count, link."""


class SnapshotError(ApexUserError):
    """A snapshot that cannot be read or used: nothing was written from it."""


class Watched(BaseModel):
    """A folder the snapshot covers."""

    path: str
    restore: bool = Field(description="False: differences are reported, never undone (a checkout outside site-packages)")


class Header(BaseModel):
    format: int = FORMAT
    created_at: str
    folders: list[Watched]
    count: int
    symlinks: dict[str, str] = Field(default_factory=dict, description="entry key -> the symlink's target")
    copies: dict[str, str] = Field(default_factory=dict, description="entry key -> sha256 of its copy in copies/")


@dataclass(slots=True)
class Entry:
    folder: int
    path: str
    """Relative to its watched folder; '' is the folder itself."""
    kind: int
    mode: int
    uid: int
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    nlink: int
    link: int = -1
    """Its hard link's name in the links' folder (format 2: its inode number; -1: none, e.g. another file system)."""

    @property
    def key(self) -> str:
        return f"{self.folder}/{self.path}"


Change = Literal["new", "removed", "replaced", "changed", "metadata", "folder"]
Action = Literal["none", "remove", "remove-tree", "make-folder", "relink", "copy", "metadata", "symlink", "drop-bytecode",
                 "report"]


class Difference(BaseModel):
    """One way the environment differs from its snapshot, and the way back."""

    path: str
    change: Change
    detail: str
    restorable: bool = Field(description="whether restore undoes it; when false, way_back says what the user must do")
    way_back: str


@dataclass(slots=True)
class Plan:
    """What restore does about one entry (``action``), and how status words it (``difference``)."""

    key: str
    path: Path
    old: Entry | None
    new: Entry | None
    action: Action
    difference: Difference | None
    """None when nothing a person would call a change remains (a file replaced by its own bytes)."""


_KIND_OF = {st.S_IFREG: FILE, st.S_IFDIR: FOLDER, st.S_IFLNK: SYMLINK}


def _kind(mode: int) -> int:
    if st.S_ISREG(mode):
        return FILE
    if st.S_ISDIR(mode):
        return FOLDER
    if st.S_ISLNK(mode):
        return SYMLINK
    return OTHER


def _entry(folder: int, path: str, info: os.stat_result, link: int = -1) -> Entry:
    return Entry(folder, path, _kind(info.st_mode), st.S_IMODE(info.st_mode), info.st_uid, info.st_size, info.st_mtime_ns,
                 info.st_ctime_ns, info.st_ino, info.st_nlink, link)


def _link_name(links: Path, number: int) -> Path:
    return links / f"{number % BUCKETS:02x}" / str(number)


def links_folder(snapshot_folder: Path) -> Path:
    """Where a snapshot's links are kept (format 2), from one session to the next."""
    return snapshot_folder.with_name(f"{snapshot_folder.name}-links")


# --- the walk ---------------------------------------------------------------------------------------


class _Walker:
    """A stat walk of watched folders that never follows a symlink, optionally making sure every
    regular file has its link in ``links`` on the way (named by its inode: two stats for a file the
    store already holds, nothing written; a link and a stat through it for any other, the stat then
    the inode the link holds, after the link moved its ctime)."""

    def __init__(self, folders: list[Watched], links: Path | None, exclude: Iterable[Path]) -> None:
        self.folders = folders
        self.links = links
        self.exclude = {str(p) for p in exclude}
        self.linked = [links is not None and f.restore for f in folders]
        self.symlinks: dict[str, str] = {}
        self._lock = threading.Lock()
        self._buckets: list[int] = []

    def run(self) -> list[Entry]:
        if self.links is not None:
            for bucket in range(BUCKETS):
                (self.links / f"{bucket:02x}").mkdir(mode=0o700, exist_ok=True)
            self._buckets = [os.open(self.links / f"{b:02x}", os.O_RDONLY | os.O_DIRECTORY) for b in range(BUCKETS)]
        try:
            entries: list[Entry] = []
            tasks: list[tuple[int, str]] = []
            for index, watched in enumerate(self.folders):
                try:
                    info = os.lstat(watched.path)
                except FileNotFoundError:
                    continue
                entries.append(_entry(index, "", info))
                if st.S_ISDIR(info.st_mode):
                    entries.extend(self._folder(index, "", tasks, top=True))
            # Each subfolder of a watched folder is one task: two threads balance torch against the rest.
            with ThreadPoolExecutor(WALK_THREADS) as pool:
                for found in pool.map(lambda task: self._tree(*task), tasks):
                    entries.extend(found)
            return entries
        finally:
            for handle in self._buckets:
                os.close(handle)

    def _tree(self, index: int, relative: str) -> list[Entry]:
        found: list[Entry] = []
        pending = [relative]
        while pending:
            found.extend(self._folder(index, pending.pop(), pending))
        return found

    def _folder(self, index: int, relative: str, pending: list, top: bool = False) -> list[Entry]:
        """The entries directly in one folder; its subfolders go onto ``pending``."""
        base = self.folders[index].path
        absolute = os.path.join(base, relative) if relative else base
        if absolute in self.exclude:
            return []
        found: list[Entry] = []
        try:
            handle = os.open(absolute, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return found  # vanished or unreadable: the comparison reports what is missing
        linking = self.linked[index]
        stat, kinds, prefix = os.stat, _KIND_OF, f"{relative}/" if relative else ""
        try:
            with os.scandir(handle) as listing:
                names = [(item.name, item.is_file(follow_symlinks=False)) for item in listing]
            for name, regular in names:
                link = -1
                try:
                    if regular and linking:
                        info, link = self._link(index, handle, name)
                    else:
                        info = stat(name, dir_fd=handle, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                mode = info.st_mode
                kind = kinds.get(mode & 0o170000, OTHER)
                entry = Entry(index, prefix + name, kind, mode & 0o7777, info.st_uid, info.st_size, info.st_mtime_ns,
                              info.st_ctime_ns, info.st_ino, info.st_nlink, link)
                found.append(entry)
                if kind == FOLDER:
                    if not self.exclude or os.path.join(base, entry.path) not in self.exclude:
                        pending.append((index, entry.path) if top else entry.path)
                elif kind == SYMLINK:
                    try:
                        target = os.readlink(name, dir_fd=handle)
                    except OSError:
                        target = ""
                    with self._lock:
                        self.symlinks[entry.key] = target
        finally:
            os.close(handle)
        return found

    def _link(self, index: int, handle: int, name: str) -> tuple[os.stat_result, int]:
        info = os.stat(name, dir_fd=handle, follow_symlinks=False)
        number = info.st_ino
        bucket = self._buckets[number % BUCKETS]
        try:
            held = os.stat(str(number), dir_fd=bucket, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if held.st_ino == number and held.st_dev == info.st_dev:
                return info, number  # an earlier session's link to this very inode
            try:
                os.unlink(str(number), dir_fd=bucket)  # a name that holds another inode is no link of this file
            except OSError:
                return info, -1  # not even removable (a folder put there): this file goes without a link
        try:
            os.link(name, str(number), src_dir_fd=handle, dst_dir_fd=bucket, follow_symlinks=False)
        except FileExistsError:  # the other walking thread linked another name of this inode just now
            held = os.stat(str(number), dir_fd=bucket, follow_symlinks=False)
            return info, number if held.st_ino == number and held.st_dev == info.st_dev else -1
        except OSError as error:
            if error.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES):
                if error.errno == errno.EXDEV:
                    self.linked[index] = False  # another file system: this folder's files are reported, not relinked
                return info, -1
            raise
        linked = os.stat(str(number), dir_fd=bucket, follow_symlinks=False)
        if linked.st_ino != number:  # the file was replaced between the stat and the link
            os.unlink(str(number), dir_fd=bucket)
            return os.stat(name, dir_fd=handle, follow_symlinks=False), -1
        return linked, number


def scan(folders: list[Watched], exclude: Iterable[Path] = ()) -> dict[str, Entry]:
    """The watched folders as they are now, by entry key (a stat walk; no links, nothing written)."""
    return {e.key: e for e in _Walker(folders, None, exclude).run()}


# --- the manifest ---------------------------------------------------------------------------------


def _write_manifest(folder: Path, header: Header, entries: list[Entry]) -> None:
    paths = "\0".join(e.path for e in entries).encode(sys.getfilesystemencoding(), "surrogateescape")
    numbers = array.array("q", [n for e in entries for n in (e.folder, e.kind, e.mode, e.uid, e.size, e.mtime_ns, e.ctime_ns,
                                                          e.ino - 2 * _INT64 if e.ino >= _INT64 else e.ino, e.nlink,
                                                          e.link - 2 * _INT64 if e.link >= _INT64 else e.link)])
    head = header.model_dump_json().encode()
    body = numbers.tobytes()
    atomic_write(folder / MANIFEST, MAGIC + struct.pack("<QQQ", len(head), len(paths), len(body)) + head + paths + body,
                 mode=0o600)


def _read_manifest(folder: Path) -> tuple[Header, list[Entry]]:
    path = folder / MANIFEST
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SnapshotError(f"the environment snapshot {path} cannot be read ({error.strerror})") from None
    problem = f"the environment snapshot {path} is damaged"
    start = len(MAGIC) + 24
    if not data.startswith(MAGIC) or len(data) < start:
        raise SnapshotError(f"{problem} (not a snapshot of this apex)")
    head_size, paths_size, body_size = struct.unpack("<QQQ", data[len(MAGIC):start])
    if start + head_size + paths_size + body_size != len(data):
        raise SnapshotError(f"{problem} (its sections do not add up)")
    try:
        header = Header.model_validate_json(data[start:start + head_size])
    except ValidationError as error:
        raise SnapshotError(f"{problem} ({error.errors()[0]['msg']})") from None
    blob = data[start + head_size:start + head_size + paths_size]
    numbers = array.array("q")
    numbers.frombytes(data[start + head_size + paths_size:])
    names = blob.decode(sys.getfilesystemencoding(), "surrogateescape").split("\0") if header.count else []
    if len(names) != header.count or len(numbers) != COLUMNS * header.count:
        raise SnapshotError(f"{problem} ({header.count} entries announced, {len(names)} paths, "
                            f"{len(numbers) // COLUMNS} records)")
    entries = []
    folders = len(header.folders)
    numbers_of = iter(numbers)
    for name, (folder_index, kind, mode, uid, size, mtime_ns, ctime_ns, ino, nlink, link) in zip(names, zip(*[numbers_of] * COLUMNS)):
        if not 0 <= folder_index < folders or name.startswith("/") or "\0" in name or (".." in name and ".." in name.split("/")):
            raise SnapshotError(f"{problem} (entry {name!r} lies outside its folder)")
        entries.append(Entry(folder_index, name, kind, mode, uid, size, mtime_ns, ctime_ns, ino + 2 * _INT64 if ino < 0 else ino,
                             nlink, link + 2 * _INT64 if link < -1 else link))
    return header, entries


# --- the snapshot ---------------------------------------------------------------------------------


class Snapshot:
    """A taken snapshot: its folder, header and entries (by key)."""

    def __init__(self, folder: Path, header: Header, entries: list[Entry]) -> None:
        self.folder = folder
        self.header = header
        self.entries = {e.key: e for e in entries}
        self.links = folder / LINKS if header.format == 1 else links_folder(folder)

    # taking, loading, discarding

    @classmethod
    def take(cls, folder: Path, watched: list[Watched], exclude: Iterable[Path] = (), *, links: bool = True) -> Snapshot:
        """Snapshot ``watched`` into ``folder`` (replacing any earlier one there). Built beside it and
        renamed into place, so a snapshot that exists is complete. ``links=False`` takes no hard
        links (nothing in the environment is touched, not even a ctime; replaced files are then
        reported, not brought back): for a look at an environment another session may be watching."""
        discard(folder)
        partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.mkdir(mode=0o700)
        os.chmod(partial, 0o700)
        (partial / COPIES).mkdir(mode=0o700)
        store = links_folder(folder)
        if links:
            store.mkdir(mode=0o700, exist_ok=True)
            os.chmod(store, 0o700)
        walker = _Walker(watched, store if links else None, [*exclude, folder.parent])
        entries = walker.run()
        if links:
            _unlink_buckets(store, keep={e.link for e in entries if e.link >= 0})
        copies: dict[str, str] = {}
        for entry in entries:
            if entry.kind == FILE and watched[entry.folder].restore and (
                    ("/" not in entry.path and entry.size <= COPY_LIMIT) or _is_record(entry.path)):
                source = Path(watched[entry.folder].path) / entry.path
                try:
                    data = source.read_bytes()
                except OSError:
                    continue
                digest = hashlib.sha256(data).hexdigest()
                (partial / COPIES / digest).write_bytes(data)
                copies[entry.key] = digest
        header = Header(created_at=dt.datetime.now(dt.timezone.utc).isoformat(), folders=watched, count=len(entries),
                        symlinks=walker.symlinks, copies=copies)
        _write_manifest(partial, header, entries)
        os.replace(partial, folder)
        fsync_dir(folder.parent)
        return cls(folder, header, entries)

    @classmethod
    def load(cls, folder: Path) -> Snapshot | None:
        """The snapshot in ``folder``; None when there is none."""
        if not (folder / MANIFEST).exists():
            return None
        header, entries = _read_manifest(folder)
        return cls(folder, header, entries)

    def save(self) -> None:
        self.header.count = len(self.entries)
        self.header.symlinks = {k: v for k, v in self.header.symlinks.items() if k in self.entries}
        self.header.copies = {k: v for k, v in self.header.copies.items() if k in self.entries}
        _write_manifest(self.folder, self.header, list(self.entries.values()))

    # comparing

    def usable_folders(self, watched: list[Watched]) -> list[Watched]:
        """The snapshot's folders that this process also watches (a snapshot naming other folders
        is not followed there), restorable only where both say so."""
        now = {w.path: w for w in watched}
        return [Watched(path=f.path, restore=f.restore and now[f.path].restore) if f.path in now
                else Watched(path=f.path, restore=False) for f in self.header.folders]

    def plan(self, watched: list[Watched], known: dict[str, str | None] | None = None,
             accounted: Iterable[str] = (), exclude: Iterable[Path] = ()) -> list[Plan]:
        """Every difference between the environment now and this snapshot, each with what restore
        does about it. ``known``: sha256 of files as they were when the session began (from the
        journal; None: the file did not exist); ``accounted``: paths a live patch changed (status
        lists those under the patch, not here)."""
        folders = self.usable_folders(watched)
        current = {e.key: e for e in _Walker(folders, None, [*exclude, self.folder.parent]).run()}
        return _Planner(self, folders, current, known or {}, set(accounted)).run()

    def differences(self, watched: list[Watched], known: dict[str, str | None] | None = None,
                    accounted: Iterable[str] = ()) -> list[Difference]:
        return [p.difference for p in self.plan(watched, known, accounted) if p.difference is not None]

    # restoring

    def restore(self, watched: list[Watched], known: dict[str, str | None] | None = None) -> RestoreOutcome:
        """Bring the environment back to this snapshot as far as it can be; what cannot be is in
        ``unrestorable`` (each with its way back), and this snapshot is then saved as the baseline
        it still is, with the entries restore did bring back re-stated."""
        plans = self.plan(watched, known)
        restorer = _Restorer(self, self.usable_folders(watched), plans)
        outcome = restorer.run()
        if outcome.unrestorable:
            self._rebase(watched, [p for p in plans if p.key in restorer.failed])
        return outcome

    def _rebase(self, watched: list[Watched], unrestored: list[Plan]) -> None:
        """After a partial restore: every entry but the unrestored ones takes its state now (our own
        relinks moved ctimes; dropped bytecode is gone), so status reports only what is still wrong."""
        folders = self.usable_folders(watched)
        current = {e.key: e for e in _Walker(folders, None, [self.folder.parent]).run()}
        kept = {p.key for p in unrestored}
        for plan in unrestored:
            old = plan.old
            if old is not None and old.link >= 0 and plan.new is not None and plan.new.ino == old.ino:
                # Edited in place: the link is the same inode, so it holds the edited bytes; never relink it.
                _link_name(self.links, old.link).unlink(missing_ok=True)
                old.link, old.nlink = -1, old.nlink - 1  # our own unlink is not someone else's link change
        for key, old in list(self.entries.items()):
            if key in kept:
                continue
            now = current.get(key)
            if now is None:
                del self.entries[key]
                continue
            now.link = old.link if now.ino == old.ino else -1  # a relinked original keeps its link
            self.entries[key] = now
        self.save()


def discard(folder: Path) -> None:
    """Remove a snapshot. Its links' store stays for the next session's snapshot (the module's
    docstring says why; with no session open, removing the store by hand is safe). A format 1
    snapshot's own links go with it (links are only names: the environment's files are not touched)."""
    _unlink_buckets(folder / LINKS)
    shutil.rmtree(folder, ignore_errors=True)
    for stale in folder.parent.glob(f"{folder.name}.partial-*") if folder.parent.is_dir() else ():
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _unlink_buckets(links: Path, keep: set[int] | None = None) -> None:
    """Unlink the links in ``links`` but those named in ``keep``, folder by folder through a handle
    (rmtree lists and stats each one). A new snapshot keeps the inodes it holds and so frees the
    bytes of files replaced or removed since the last session, as ending that session used to."""
    if not links.is_dir() or links.is_symlink():
        return
    for bucket in range(BUCKETS):
        try:
            handle = os.open(links / f"{bucket:02x}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            for name in os.listdir(handle):
                if keep is not None and name.isdigit() and int(name) in keep:
                    continue
                try:
                    os.unlink(name, dir_fd=handle)
                except OSError:
                    pass
        finally:
            os.close(handle)


# --- planning -------------------------------------------------------------------------------------


def _parent_key(entry: Entry) -> str:
    return f"{entry.folder}/{entry.path.rsplit('/', 1)[0] if '/' in entry.path else ''}"


def _is_record(path: str) -> bool:
    return path.count("/") == 1 and path.endswith(".dist-info/RECORD")


def _is_bytecode(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in f"/{path}"


def _same_metadata(a: Entry, b: Entry) -> bool:
    return a.mode == b.mode and a.uid == b.uid and a.size == b.size and a.mtime_ns == b.mtime_ns


def _what_differs(old: Entry, new: Entry) -> str:
    parts = []
    if old.size != new.size:
        parts.append(f"size {old.size} -> {new.size}")
    if old.mode != new.mode:
        parts.append(f"mode {old.mode:o} -> {new.mode:o}")
    if old.uid != new.uid:
        parts.append(f"owner {old.uid} -> {new.uid}")
    if old.mtime_ns != new.mtime_ns:
        parts.append("mtime moved")
    elif old.ctime_ns != new.ctime_ns:
        parts.append("mtime as it was (set back) though the inode changed")
    return ", ".join(parts) or "inode changed"


class _Planner:
    def __init__(self, snapshot: Snapshot, folders: list[Watched], current: dict[str, Entry],
                 known: dict[str, str | None], accounted: set[str]) -> None:
        self.snapshot = snapshot
        self.folders = folders
        self.current = current
        self.known = known
        self.accounted = accounted
        self._index = None

    def absolute(self, entry: Entry) -> Path:
        base = Path(self.folders[entry.folder].path)
        return base / entry.path if entry.path else base

    def index(self):  # noqa: ANN201 - RecordIndex, imported late (integrity imports the points)
        """The RECORDs as they were when the session began (their copies), not as they are now."""
        if self._index is None:
            from apex_core.patcher.integrity import RecordIndex

            records = {}
            for key, digest in self.snapshot.header.copies.items():
                entry = self.snapshot.entries.get(key)
                if entry is not None and _is_record(entry.path) and entry.folder < len(self.folders):
                    try:
                        text = (self.snapshot.folder / COPIES / digest).read_bytes()
                    except OSError:
                        continue
                    if hashlib.sha256(text).hexdigest() == digest:
                        records[str(self.absolute(entry))] = text.decode("utf-8", "surrogateescape")
            self._index = RecordIndex([Path(f.path) for f in self.folders], records or None)  # none copied: read them now
        return self._index

    def expected(self, entry: Entry, path: Path) -> str | None:
        """The sha256 the file had when the session began, where something records it."""
        if entry.key in self.snapshot.header.copies:
            return self.snapshot.header.copies[entry.key]
        if str(path) in self.known and self.known[str(path)] is not None:
            return self.known[str(path)]
        recorded = self.index().get(path)
        return recorded.sha256 if recorded is not None else None

    def reinstall(self, path: Path) -> str:
        from apex_core.patcher.integrity import reinstall_command

        recorded = self.index().get(path)
        if recorded is not None:
            return (f"restore cannot bring its bytes back (changed in place); reinstall {recorded.distribution} "
                    f"{recorded.version}: {reinstall_command(recorded)}, then apex patch restore")
        return ("restore cannot bring its bytes back (changed in place) and no installed package lists it: put it back by "
                "hand, then apex patch restore --forget")

    def run(self) -> list[Plan]:
        snapshot = self.snapshot.entries
        plans: list[Plan] = []
        new_trees: set[str] = set()
        for key, new in sorted(self.current.items(), key=lambda item: item[1].path.count("/")):
            if key in snapshot:
                continue
            inside_new = _parent_key(new) in new_trees
            if new.kind == FOLDER:
                new_trees.add(key)
            if not inside_new:  # a new folder is removed whole: what is in it is not listed again
                plans.append(self._new(new))
        for key, old in snapshot.items():
            new = self.current.get(key)
            if old.kind == FOLDER and new is not None and new.kind == FOLDER:
                plan = self._folder(old, new)
            elif new is None or new.kind != old.kind:
                plan = self._missing(old, new)
            elif old.kind == FILE:
                plan = self._file(old, new)
            elif old.kind == SYMLINK:
                plan = self._symlink(old, new)
            else:
                plan = None if old.ino == new.ino and old.ctime_ns == new.ctime_ns else self._report(
                    old, new, "changed", "a special file changed", "put it back by hand")
            if plan is not None:
                plans.append(plan)
        self._quiet_folders(plans)
        return plans

    def _plan(self, old: Entry | None, new: Entry | None, action: Action, change: Change | None, detail: str,
              way_back: str) -> Plan:
        entry = old or new
        assert entry is not None
        path = self.absolute(entry)
        restorable = action not in ("report", "none")
        if not self.folders[entry.folder].restore and action != "none":
            action, restorable = "report", False
            way_back = f"reported only: {self.folders[entry.folder].path} is outside site-packages (someone's checkout)"
        difference = None
        if change is not None and str(path) not in self.accounted:
            difference = Difference(path=str(path), change=change, detail=detail, restorable=restorable, way_back=way_back)
        return Plan(entry.key, path, old, new, action, difference)

    def _report(self, old: Entry, new: Entry | None, change: Change, detail: str, way_back: str) -> Plan:
        return self._plan(old, new, "report", change, detail, way_back)

    def _new(self, new: Entry) -> Plan:
        what = _KIND_NAMES[new.kind]
        if new.kind == FOLDER:
            held = sorted(e.path[len(new.path) + 1:] for k, e in self.current.items()
                          if k.startswith(f"{new.key}/") and e.kind != FOLDER)
            listed = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
            return self._plan(None, new, "remove-tree", "new", f"new folder holding {listed or 'nothing'}", "restore removes it")
        return self._plan(None, new, "remove", "new", f"new {what}", "restore removes it")

    def _missing(self, old: Entry, new: Entry | None) -> Plan:
        change: Change = "removed" if new is None else "replaced"
        detail = "removed" if new is None else f"replaced by a {_KIND_NAMES[new.kind]}"
        if old.kind == FOLDER:
            return self._plan(old, new, "make-folder", change, detail, "restore makes the folder again (and puts back what was in it)")
        if old.kind == SYMLINK:
            return self._plan(old, new, "symlink", change, detail, "restore makes the symlink again")
        if old.kind == FILE:
            if self._link_good(old):
                return self._plan(old, new, "relink", change, detail, "restore brings back the original (held by a hard link)")
            if _is_bytecode(old.path):
                return self._plan(old, new, "drop-bytecode", change, detail,
                                  "restore leaves it removed; Python compiles it again from its source")
            return self._report(old, new, change, f"{detail}; no link holds its original bytes", self.reinstall(self.absolute(old)))
        return self._report(old, new, change, detail, "put it back by hand")

    def _link_good(self, old: Entry) -> bool:
        """The link still holds the original: same inode, size and mtime, and the known sha256."""
        if old.link < 0:
            return False
        link = _link_name(self.snapshot.links, old.link)
        try:
            info = os.lstat(link)
        except OSError:
            return False
        if info.st_ino != old.ino or info.st_size != old.size or info.st_mtime_ns != old.mtime_ns or not st.S_ISREG(info.st_mode):
            return False
        expected = self.expected(old, self.absolute(old))
        return expected is None or sha256_file(link) == expected

    def _file(self, old: Entry, new: Entry) -> Plan | None:
        if old.ino == new.ino and old.size == new.size and old.mtime_ns == new.mtime_ns and old.mode == new.mode \
                and old.uid == new.uid and (old.ctime_ns == new.ctime_ns or old.nlink != new.nlink):
            # Untouched, or only linked or unlinked elsewhere (another snapshot, uv's and conda's
            # hard-linked installs), which moves ctime too. (An edit in place with its mtime set
            # back *and* a link made or removed at once passes here: docs/patching.md says so.)
            return None
        path = self.absolute(old)
        if old.ino == new.ino:
            expected = self.expected(old, path)
            if expected is not None and sha256_file(path) == expected:
                if _same_metadata(old, new):
                    return self._plan(old, new, "none", None, "", "")  # ctime alone moved (a chmod undone): the same file
                return self._plan(old, new, "metadata", "metadata", _what_differs(old, new), "restore puts its mode and mtime back")
            return self._edited(old, new, path, expected)
        # Another inode now has the name.
        if self._link_good(old):
            same = _same_metadata(old, new) and _same_bytes(path, _link_name(self.snapshot.links, old.link))
            return self._plan(old, new, "relink", None if same else "replaced",
                              f"replaced by another file ({_what_differs(old, new)})",
                              "restore brings back the original (held by a hard link)")
        expected = self.expected(old, path)
        if expected is not None and sha256_file(path) == expected:
            if _same_metadata(old, new):
                return self._plan(old, new, "none", None, "", "")
            return self._plan(old, new, "metadata", "metadata", f"replaced by the same bytes ({_what_differs(old, new)})",
                              "restore puts its mode and mtime back")
        return self._edited(old, new, path, expected, replaced=True)

    def _edited(self, old: Entry, new: Entry, path: Path, expected: str | None, replaced: bool = False) -> Plan:
        how = "replaced" if replaced else "changed in place"
        detail = f"{how} ({_what_differs(old, new)})" + ("" if expected is not None else "; no record of its bytes to check")
        change: Change = "replaced" if replaced else "changed"
        if old.key in self.snapshot.header.copies:
            return self._plan(old, new, "copy", change, detail, "restore writes back the copy taken when the session began")
        if _is_bytecode(old.path):
            return self._plan(old, new, "drop-bytecode", change, detail, "restore removes it; Python compiles it again from its source")
        return self._report(old, new, change, detail, self.reinstall(path))

    def _symlink(self, old: Entry, new: Entry) -> Plan | None:
        was, now = self.snapshot.header.symlinks.get(old.key, ""), _readlink(self.absolute(new))
        if was == now and old.uid == new.uid:
            return None
        return self._plan(old, new, "symlink", "changed", f"symlink now points to {now!r}, not {was!r}", "restore points it back")

    def _folder(self, old: Entry, new: Entry) -> Plan | None:
        if old.mode == new.mode and old.mtime_ns == new.mtime_ns and old.uid == new.uid:
            return None
        if old.mode != new.mode or old.uid != new.uid:
            return self._plan(old, new, "metadata", "metadata", _what_differs(old, new), "restore puts its mode back")
        return self._plan(old, new, "metadata", "folder", "folder modified (entries were added or removed in it)",
                          "restore puts its mtime back")

    def _quiet_folders(self, plans: list[Plan]) -> None:
        """A folder whose mtime moved because of a difference listed inside it is not listed again."""
        explained = set()
        for plan in plans:
            if plan.difference is not None or str(plan.path) in self.accounted:
                explained.add(str(plan.path.parent))
        explained.update(str(Path(p).parent) for p in self.accounted)
        for plan in plans:
            if plan.difference is not None and plan.difference.change == "folder" and str(plan.path) in explained:
                plan.difference = None


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as left, open(b, "rb") as right:
            while True:
                x, y = left.read(1 << 20), right.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


# --- restoring ------------------------------------------------------------------------------------


class RestoreOutcome(BaseModel):
    restored: list[str] = Field(default_factory=list, description="one line per difference restore undid")
    unrestorable: list[Difference] = Field(default_factory=list)


class _Restorer:
    def __init__(self, snapshot: Snapshot, folders: list[Watched], plans: list[Plan]) -> None:
        self.snapshot = snapshot
        self.folders = folders
        self.plans = plans
        self.roots = [Path(f.path) for f in folders if f.restore]
        self.outcome = RestoreOutcome()
        self.failed: set[str] = set()
        """Keys of the plans restore did not carry out."""

    def _safe(self, path: Path) -> bool:
        """Restore writes only inside the restorable folders, through no symlink."""
        from apex_core.patcher.journal import inside

        return path in self.roots or path.parent in self.roots or inside(path.parent, self.roots)

    def run(self) -> RestoreOutcome:
        order = {"remove": 0, "remove-tree": 0, "make-folder": 1, "relink": 2, "copy": 2, "metadata": 2, "symlink": 2,
                 "drop-bytecode": 2, "none": 3, "report": 3}
        for plan in sorted(self.plans, key=lambda p: (order[p.action], p.path.as_posix().count("/"))):
            if plan.action == "report":
                self.failed.add(plan.key)
                if plan.difference is not None:
                    self.outcome.unrestorable.append(plan.difference)
                continue
            if plan.action == "none":
                continue
            if not self._safe(plan.path):
                self.failed.add(plan.key)
                self.outcome.unrestorable.append(Difference(
                    path=str(plan.path), change="changed", restorable=False,
                    detail="its folder is no longer inside site-packages (a symlink leads out)", way_back="put it back by hand"))
                continue
            try:
                self._do(plan)
            except OSError as error:
                self.failed.add(plan.key)
                self.outcome.unrestorable.append(Difference(
                    path=str(plan.path), change=plan.difference.change if plan.difference else "changed", restorable=False,
                    detail=f"restore failed: {error.strerror}", way_back="put it back by hand, then apex patch restore"))
                continue
            if plan.difference is not None:
                self.outcome.restored.append(f"{plan.difference.change} {plan.path}: {plan.difference.way_back.removeprefix('restore ')}")
        self._folder_times()
        return self.outcome

    def _do(self, plan: Plan) -> None:
        path, old = plan.path, plan.old
        if plan.action == "remove":
            os.unlink(path)
        elif plan.action == "remove-tree":
            shutil.rmtree(path)
        elif plan.action == "drop-bytecode":
            path.unlink(missing_ok=True)
        elif plan.action == "make-folder":
            assert old is not None
            _clear(path, keep_folder=True)
            path.mkdir(mode=0o700, exist_ok=True)
            os.chmod(path, old.mode)
        elif plan.action == "relink":
            assert old is not None
            _clear(path)
            temporary = path.with_name(f".{path.name}.apex-relink-{os.getpid()}.tmp")
            temporary.unlink(missing_ok=True)
            os.link(_link_name(self.snapshot.links, old.link), temporary, follow_symlinks=False)
            os.replace(temporary, path)
            if st.S_IMODE(os.lstat(path).st_mode) != old.mode:
                os.chmod(path, old.mode)
        elif plan.action == "copy":
            assert old is not None
            digest = self.snapshot.header.copies[old.key]
            data = (self.snapshot.folder / COPIES / digest).read_bytes()
            if hashlib.sha256(data).hexdigest() != digest:
                raise OSError(errno.EIO, "its copy was changed since the session began")
            _clear(path)
            atomic_write(path, data, mode=old.mode, mtime_ns=old.mtime_ns)
        elif plan.action == "metadata":
            assert old is not None
            if old.kind == FILE:
                os.chmod(path, old.mode)
                os.utime(path, ns=(os.lstat(path).st_atime_ns, old.mtime_ns))
            elif old.kind == FOLDER:
                os.chmod(path, old.mode)
            if old.uid != (plan.new.uid if plan.new else old.uid) and os.geteuid() == 0:
                os.chown(path, old.uid, -1, follow_symlinks=False)
        elif plan.action == "symlink":
            assert old is not None
            _clear(path)
            temporary = path.with_name(f".{path.name}.apex-relink-{os.getpid()}.tmp")
            temporary.unlink(missing_ok=True)
            os.symlink(self.snapshot.header.symlinks.get(old.key, ""), temporary)
            os.replace(temporary, path)
            os.utime(path, ns=(old.mtime_ns, old.mtime_ns), follow_symlinks=False)

    def _folder_times(self) -> None:
        """Every folder's mode and mtime as the snapshot has them, deepest first (whatever restore
        did above moved the mtimes of the folders it worked in)."""
        folders = sorted((e for e in self.snapshot.entries.values() if e.kind == FOLDER and self.folders[e.folder].restore),
                         key=lambda e: -e.path.count("/") - (1 if e.path else 0))
        for entry in folders:
            path = Path(self.folders[entry.folder].path) / entry.path if entry.path else Path(self.folders[entry.folder].path)
            try:
                info = os.lstat(path)
                if not st.S_ISDIR(info.st_mode):
                    continue
                if st.S_IMODE(info.st_mode) != entry.mode:
                    os.chmod(path, entry.mode)
                if info.st_mtime_ns != entry.mtime_ns:
                    os.utime(path, ns=(info.st_atime_ns, entry.mtime_ns), follow_symlinks=False)
            except OSError:
                continue


def _clear(path: Path, keep_folder: bool = False) -> None:
    """Remove whatever stands at ``path`` now (a file where a folder was, or the other way round)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if st.S_ISDIR(info.st_mode):
        if not keep_folder:
            shutil.rmtree(path)
    else:
        os.unlink(path)


# --- what is watched ------------------------------------------------------------------------------


def watched_folders(roots: list[Path] | None = None) -> list[Watched]:
    """The folders a session's snapshot covers. With ``roots`` (a toy environment's, or
    APEX_PATCH_ROOTS): exactly those. Otherwise this environment: site-packages (purelib and
    platlib), the venv's scripts folder, and, reported only, the folders of the stacks' packages
    that lie outside them (an editable checkout)."""
    from apex_core.patcher.journal import ROOTS_ENV, environment_root, patchable_roots

    if roots is not None or os.environ.get(ROOTS_ENV):
        chosen = sorted({Path(r).resolve() for r in roots}) if roots is not None else patchable_roots()
        return [Watched(path=str(r), restore=True) for r in chosen]
    folders = [Watched(path=str(r), restore=True) for r in patchable_roots()]
    scripts = Path(sysconfig.get_paths()["scripts"]).resolve()
    if sys.prefix != sys.base_prefix and scripts.is_relative_to(environment_root()) and scripts.is_dir():
        folders.append(Watched(path=str(scripts), restore=True))
    for folder in _stack_folders():
        if not any(folder.is_relative_to(Path(w.path)) for w in folders):
            folders.append(Watched(path=str(folder), restore=False))
    return folders


def _stack_folders() -> list[Path]:
    from apex_core.patcher.points import POINTS
    from apex_core.sources.packages import package_root

    found = []
    for name in sorted({p.module.split(".", 1)[0] for p in POINTS}):
        root = package_root(name)
        if root is not None and root.is_dir():
            found.append(root)
    return found
