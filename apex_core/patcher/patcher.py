"""Changing the installed stack's files under a write-ahead journal, and undoing every change,
whoever made it.

A session (from the first patch of a clean environment to the restore that ends it) starts with
a snapshot of the whole environment (``snapshot.py``): every file of site-packages and the venv's
scripts, with hard links that keep the originals' bytes. The order of every replacement: the lock
is held; the original is copied to the journal's backups and flushed; the journal, naming the
target, its original hash, mode and mtime and the backup, is written atomically; only then is the
target replaced atomically (and its bytecode cache, journaled the same way, removed so Python
cannot run stale code). A kill at any instant leaves either an unchanged target or a journaled
one.

Restoring writes each backup back, newest first, once its sha256 matches the journal's (a backup
someone changed is never written), then brings the environment back to the snapshot: what patched
code or anyone else added is removed, what was replaced or removed comes back from its link, and
what cannot come back (an edit in place of a file no copy or link holds) is reported with its way
back while the session stays open, so status keeps saying so.

``recover`` runs at the start of every apex command: it undoes what a killed run left, the
patches it left open or half restored, and, once their run is gone, the patches a run applied for
itself (``owned``), whatever their state. A recovery that cannot complete says so in one line and
blocks only what would patch (a ``Patcher`` refuses to open); other commands go on.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import secrets
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.errors import ApexUserError
from apex_core.patcher import journal as jr
from apex_core.patcher import quiet
from apex_core.patcher.faults import fault_point
from apex_core.patcher.files import (
    atomic_write,
    bytecode_files,
    durable_copy,
    durable_unlink,
    file_state,
    sha256_bytes,
    stray_temporaries,
)
from apex_core.patcher.lock import EnvironmentLock, ProcessIdentity
from apex_core.patcher.snapshot import Difference, Snapshot, SnapshotError, Watched, discard, watched_folders


class RestoreError(ApexUserError):
    """Something could not be put back: the journal, backups and snapshot are kept, the session stays open."""


class RecoveryError(ApexUserError):
    """What an earlier run left in this environment cannot be undone: patching is blocked until it is."""


class RestoreReport(BaseModel):
    patches: list[str]
    files_restored: int
    files_unchanged: int
    journal: str | None
    environment: list[str] = Field(default_factory=list,
                                   description="changes no patch made (new, replaced, edited files) that the restore undid")
    forgotten: bool = Field(default=False, description="the session was dropped without writing anything (--forget)")


class EnvironmentStatus(BaseModel):
    """What ``apex patch status`` and the MCP tool ``patch_status`` report."""

    patched: bool
    journal: jr.Journal | None = Field(description="the live journal: each patch's task, solution, state and files")
    session_since: str | None = Field(description="when the session's snapshot of the environment was taken (None: no session)")
    differences: list[Difference] = Field(description="every change since the session began that no patch accounts for, "
                                                      "whoever made it, with its way back")
    unaccounted: list[str] = Field(description="one line per change no journal lists: the differences, and outside a session "
                                               "the patch points' files and startup files that differ from what their "
                                               "packages installed")
    problem: str | None = Field(default=None, description="a journal or snapshot that cannot be acted on, and why")


@dataclass
class _Environment:
    """Where a session of this environment writes (``roots``), what its snapshot watches, and
    where its lock, pointer and snapshot are kept."""

    roots: list[Path]
    explicit_roots: list[Path] | None
    cache_dir: Path | None

    @functools.cached_property
    def watched(self) -> list[Watched]:
        return watched_folders(self.explicit_roots)

    @property
    def snapshot_folder(self) -> Path:
        return jr.state_dir(self.cache_dir) / f"{jr.environment_key()}.snapshot"

    def lock(self) -> EnvironmentLock:
        return EnvironmentLock(jr.lock_path(self.cache_dir))


def _environment(roots: Iterable[Path] | None, cache_dir: Path | None) -> _Environment:
    explicit = sorted(Path(r).resolve() for r in roots) if roots is not None else None
    return _Environment(explicit if explicit is not None else jr.patchable_roots(), explicit, cache_dir)


class Patcher:
    """One patching session of this environment; use it as a context manager.

    ``roots`` are the folders patches may write in, and the snapshot watches (default: this
    interpreter's site-packages, plus its scripts); ``cache_dir`` holds the lock, the pointer to
    the live journal and the snapshot (default: beside site-packages). ``owned``: the patches this
    session begins belong to this process (the final benchmark, the pipeline): once it is gone,
    the next apex command restores them whatever their state. Without it a patch stays until
    ``apex patch restore``, as one applied with ``apex patch apply`` should.
    """

    def __init__(self, results_root: Path, *, roots: Iterable[Path] | None = None, cache_dir: Path | None = None,
                 owned: bool = False) -> None:
        self.results_root = Path(results_root)
        self.env = _environment(roots, cache_dir)
        self.roots = self.env.roots
        self.cache_dir = cache_dir
        self.owned = owned
        self.lock = self.env.lock()
        self.journal: jr.Journal | None = None
        self._previous_sigterm: object = None

    # --- session ------------------------------------------------------------------------------

    def __enter__(self) -> Patcher:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self.lock.acquire("patch it")
        fault_point("apply:after-lock")
        try:
            try:
                existing, _ = _recover_locked(self.env)
            except (jr.JournalError, RestoreError, SnapshotError) as error:
                raise RecoveryError(_blocked(error)) from None
            quiet.hold()  # from here on, a new .pyc in site-packages is a finding, not our own
            me = ProcessIdentity.current()
            if existing is not None:
                self.journal = existing.model_copy(update={"owner_pid": me.pid, "owner": me})
            else:
                _refuse_a_second_session(self.env)
                # The snapshot before anything else: a pointer that exists always has its snapshot.
                Snapshot.take(self.env.snapshot_folder, self.env.watched, exclude=[self.results_root.resolve()])
                folder = jr.new_journal_folder(self.results_root)
                self.journal = jr.Journal(environment=str(jr.environment_root()), folder=str(folder), owner_pid=me.pid,
                                          owner=me, created_at=jr.now())
            jr.write_journal(self.journal)
            jr.write_pointer(self.journal, self.cache_dir)
            _register(self.env)
        except BaseException:
            self.lock.release()
            raise
        if threading.current_thread() is threading.main_thread():
            # SIGTERM's default ends the process without unwinding; as SystemExit it runs close().
            self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)

    def close(self) -> None:
        """Release the lock; patches marked applied stay, open ones are rolled back first, and a
        session left with no patch is ended (the environment brought back to its snapshot)."""
        try:
            if self.journal is not None:
                _roll_back(self.journal, self.env, {p.id: "rolled back: its run ended before the patch was committed"
                                                    for p in self.journal.patches if p.state == "open"})
                if not self.journal.active():
                    restore_journal(self.journal, self.env)
        finally:
            self.lock.release()
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)  # type: ignore[arg-type]
                self._previous_sigterm = None

    # --- patches ------------------------------------------------------------------------------

    def begin(self, *, task_id: str | None = None, solution: str | None = None, point: str | None = None,
              owned: bool | None = None) -> str:
        """A new patch; ``owned`` (default: the Patcher's) makes it this process's, restored once it is gone."""
        journal = self._journal()
        patch_id = f"p{len(journal.patches) + 1}-{secrets.token_hex(2)}"
        owner = ProcessIdentity.current() if (self.owned if owned is None else owned) else None
        journal.patches.append(jr.PatchRecord(id=patch_id, task_id=task_id, solution=solution, point=point, owner=owner,
                                              created_at=jr.now()))
        jr.write_journal(journal)
        return patch_id

    def replace(self, patch_id: str, changes: dict[Path, bytes]) -> None:
        """Replace each target with its new bytes, every target checked before any is touched."""
        journal = self._journal()
        targets = {Path(t).resolve(): data for t, data in changes.items()}
        for target in targets:
            self._check_writable(target)
        for target, data in targets.items():
            for cached in bytecode_files(target):
                self._journal_file(journal, patch_id, cached)
                durable_unlink(cached)
                fault_point("apply:after-bytecode")
            self._journal_file(journal, patch_id, target)
            mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
            atomic_write(target, data, mode=mode, before_rename=lambda: fault_point("apply:before-rename"))
            fault_point("apply:after-rename")
        fault_point("apply:after-all")

    def commit(self, patch_id: str, note: str | None = None, *, sha256: str | None = None,
               checked: Literal["confined", "unconfined"] | None = None) -> None:
        """The patch passed its checks: it stays until restored. ``sha256`` and ``checked``: the
        solution's bytes and how their in-model check ran (``PatchRecord`` says why)."""
        journal = self._journal()
        record = journal.patch(patch_id)
        record.state, record.note = "applied", note or record.note
        record.sha256, record.checked = sha256, checked
        jr.write_journal(journal)

    def roll_back(self, patch_id: str, note: str) -> None:
        """Undo one patch alone (its checks failed), keeping the others.

        Patches of one file stack (each journals the file as the previous one left it), so only
        the newest patch of each of its files can be undone alone."""
        journal = self._journal()
        mine = {e.target for e in journal.entries_of(patch_id)}
        later = [p.id for p in journal.patches[journal.patches.index(journal.patch(patch_id)) + 1:]
                 if p.state != "restored" and mine & {e.target for e in journal.entries_of(p.id)}]
        if later:
            raise ApexUserError(f"patch {patch_id} cannot be undone alone: {', '.join(later)} patched the same files after it; "
                                "undo those first (apex patch restore undoes all)")
        _, _, failed = _restore_patch(journal, journal.patch(patch_id), self.roots)
        if failed:
            raise RestoreError(f"patch {patch_id} could not be rolled back: {failed[0]}; the journal {journal.folder} is kept "
                               "(apex patch restore tries again with the environment's snapshot)")
        journal.patch(patch_id).note = note
        jr.write_journal(journal)

    def roll_back_all(self, note: str) -> None:
        """Undo every active patch, newest first (so a file patched twice unwinds in order), keeping the
        session and its snapshot: ``hold`` swaps one set of patches for the next this way."""
        for record in reversed(self._journal().active()):
            self.roll_back(record.id, note)

    def restore_all(self) -> RestoreReport:
        return restore_journal(self._journal(), self.env)

    # --- helpers ------------------------------------------------------------------------------

    def _journal(self) -> jr.Journal:
        if self.journal is None:
            raise RuntimeError("the patcher is not open")
        return self.journal

    def _check_writable(self, target: Path) -> None:
        if not jr.inside(target, self.roots):
            raise ApexUserError(f"{target} is outside the environment's site-packages ({', '.join(map(str, self.roots))}); "
                                "a patch may only replace files of the installed stack")
        folder = target.parent
        owner = folder.stat().st_uid
        if owner != os.geteuid():
            raise ApexUserError(f"{folder} belongs to user id {owner}, not to you ({os.geteuid()}): patching it would change "
                                "another user's environment; use a virtual environment you own (python -m venv)")
        if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
            raise ApexUserError(f"{target} cannot be written (read-only site-packages?); nothing was changed; "
                                "use a virtual environment you can write")

    def _journal_file(self, journal: jr.Journal, patch_id: str, target: Path) -> None:
        """Back up ``target`` and journal it; after this returns, changing it is safe."""
        original = file_state(target)  # after an earlier patch of the same file: its patched state
        folder_mtime = target.parent.stat().st_mtime_ns
        backup = None
        if original.exists:
            backup = f"{len(journal.entries):04d}-{target.name}"
            durable_copy(target, Path(journal.folder) / jr.BACKUP_DIR / backup, mode=0o600)
        fault_point("apply:after-backup")
        journal.entries.append(jr.JournalEntry(patch=patch_id, target=str(target), original=original, backup=backup,
                                               folder_mtime_ns=folder_mtime))
        jr.write_journal(journal)
        fault_point("apply:after-journal")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


# --- undoing the journal's own changes ----------------------------------------------------------------


class _EntryFailed(Exception):
    """One journaled file that could not be put back (the message says why); nothing was written."""


def _restore_patch(journal: jr.Journal, record: jr.PatchRecord, roots: list[Path]) -> tuple[int, int, list[str]]:
    """Put back every file of one patch, newest first: (files written, files already original, one
    line per file that could not be put back). The patch is marked restored only when none is left."""
    failed: list[str] = []
    written = unchanged = 0
    entries = journal.entries_of(record.id)
    for entry in reversed(entries):
        fault_point("restore:before-file")
        try:
            if _restore_entry(journal, entry, roots):
                written += 1
            else:
                unchanged += 1
        except _EntryFailed as error:
            failed.append(str(error))
        fault_point("restore:after-file")
    # Creating and renaming files moved the folders' mtimes: give each the one it had before the
    # patch's first change (entries are in the order they were journaled).
    folders: dict[Path, int] = {}
    for entry in entries:
        if entry.folder_mtime_ns is not None:
            folders.setdefault(Path(entry.target).parent, entry.folder_mtime_ns)
    for folder, mtime_ns in folders.items():
        try:
            os.utime(folder, ns=(folder.stat().st_atime_ns, mtime_ns))
        except OSError:
            pass
    if not failed:
        record.state = "restored"
    jr.write_journal(journal)
    return written, unchanged, failed


def _restore_entry(journal: jr.Journal, entry: jr.JournalEntry, roots: list[Path]) -> bool:
    """Put one file back as the journal says it was; True when something was written.

    Nothing from the journal is written unchecked: the target must lie in site-packages (checked
    again here, right before writing, in case a link was planted since), and a backup is written
    only once its bytes hash to the journal's sha256."""
    target = Path(entry.target)
    if not jr.inside(target, roots):
        raise _EntryFailed(f"{target} is not inside site-packages (any more): not written")
    for stray in stray_temporaries(target.parent):
        if stray.name.startswith(f".{target.name}.apex-"):
            stray.unlink(missing_ok=True)
    current = file_state(target)
    if current == entry.original:
        return False
    original = entry.original
    if not original.exists:
        durable_unlink(target)
        for compiled in bytecode_files(target):  # a patch's copy, imported by a process outside the session's quiet
            durable_unlink(compiled)
    elif current.exists and current.sha256 == original.sha256:
        # The right bytes already (a reinstall, or a restore killed after its rename): mode and mtime only.
        os.chmod(target, original.mode or 0o644)
        os.utime(target, ns=(original.mtime_ns or 0, original.mtime_ns or 0))
    else:
        backup = Path(journal.folder) / jr.BACKUP_DIR / (entry.backup or "")
        try:
            data = backup.read_bytes() if entry.backup else None
        except OSError:
            data = None
        if data is None:
            raise _EntryFailed(f"cannot restore {target}: its backup {backup} is missing")
        if sha256_bytes(data) != original.sha256 or len(data) != original.size:
            raise _EntryFailed(f"the backup {backup} of {target} was changed since it was taken (sha256 {sha256_bytes(data)}, "
                               f"the journal's {original.sha256}): not written")
        atomic_write(target, data, mode=original.mode, mtime_ns=original.mtime_ns,
                     before_rename=lambda: fault_point("restore:before-rename"))
    after = file_state(target)
    if after.exists != original.exists or after.sha256 != original.sha256:
        raise _EntryFailed(f"restored {target} but its sha256 is {after.sha256}, not the journal's {original.sha256}")
    return True


def _roll_back(journal: jr.Journal, env: _Environment, notes: dict[str, str]) -> list[str]:
    """Undo the patches ``notes`` names (id -> why) newest first, and every later patch of the same
    files with them (patches of one file stack: undoing an older one alone would undo the later
    one's change and leave its journal wrong). The ids undone; any that could not be stays 'restoring'."""
    chosen = dict(notes)
    for record in reversed(journal.patches):
        if record.id in chosen or record.state == "restored":
            continue
        position = journal.patches.index(record)
        files = {e.target for e in journal.entries_of(record.id)}
        earlier = sorted(c for c in chosen if journal.patches.index(journal.patch(c)) < position
                         and files & {e.target for e in journal.entries_of(c)})
        if earlier:
            chosen[record.id] = f"rolled back with {', '.join(earlier)}: it patched the same files after"
    if not chosen:
        return []
    for record in journal.patches:
        if record.id in chosen and record.state != "restored":
            record.state = "restoring"  # said first: a kill from here on is finished by the next command
    jr.write_journal(journal)
    undone = []
    for record in reversed(journal.patches):
        if record.id not in chosen or record.state == "restored":
            continue
        _, _, failed = _restore_patch(journal, record, env.roots)
        if not failed:
            record.note = record.note or chosen[record.id]
            undone.append(record.id)
    jr.write_journal(journal)
    return undone


def _dead(record: jr.PatchRecord) -> str | None:
    """Why ``record`` must be undone now that no session holds the lock, or None to keep it."""
    if record.state in ("open", "restoring"):
        return "rolled back: its run ended before the patch was committed"
    if record.state == "applied" and record.owner is not None and not record.owner.alive():
        return f"rolled back: the run that applied it for itself (process {record.owner.pid}) is gone"
    return None


def _original_hashes(journal: jr.Journal) -> dict[str, str | None]:
    """Each journaled file's sha256 when the session began (its first entry), None where it did not exist."""
    known: dict[str, str | None] = {}
    for entry in journal.entries:
        known.setdefault(entry.target, entry.original.sha256 if entry.original.exists else None)
    return known


def _load_snapshot(env: _Environment) -> Snapshot | None:
    return Snapshot.load(env.snapshot_folder)


def restore_journal(journal: jr.Journal, env: _Environment | None = None) -> RestoreReport:
    """Undo every patch of ``journal`` and bring the environment back to the session's snapshot;
    ends the session when everything is back, raises RestoreError (the session kept) when not."""
    env = env or _environment(None, None)
    jr.check_journal(journal, env.roots)
    for record in journal.active():
        record.state = "restoring"  # said first: a restore killed half-way is finished by the next command
    jr.write_journal(journal)
    restored = unchanged = 0
    patches, failed = [], []
    for record in reversed(journal.patches):
        if record.state == "restored":
            continue
        written, same, problems = _restore_patch(journal, record, env.roots)
        restored, unchanged, failed = restored + written, unchanged + same, failed + problems
        patches.append(record.id)
    snapshot = _load_snapshot(env)
    outcome = snapshot.restore(env.watched, _original_hashes(journal)) if snapshot is not None else None
    if failed and snapshot is not None and _journaled_files_original(journal):
        failed = []  # what the journal could not write back (a changed backup), the snapshot's links did
    lines = failed + [f"{d.path}: {d.detail}; {d.way_back}" for d in (outcome.unrestorable if outcome else [])]
    if lines:
        jr.write_journal(journal)
        raise RestoreError(f"{len(lines)} change(s) could not be undone ({lines[0]}"
                           + (f"; and {len(lines) - 1} more" if len(lines) > 1 else "")
                           + f"); the session stays open (journal {journal.folder}): apex patch status lists each with its "
                             "way back")
    for record in journal.patches:
        record.state = "restored"
    jr.write_journal(journal)
    _finish(journal, env)
    return RestoreReport(patches=patches, files_restored=restored, files_unchanged=unchanged, journal=journal.folder,
                         environment=outcome.restored if outcome else [])


def _journaled_files_original(journal: jr.Journal) -> bool:
    """Every journaled file as it was before the session's first change to it."""
    first: dict[str, jr.JournalEntry] = {}
    for entry in journal.entries:
        first.setdefault(entry.target, entry)
    for target, entry in first.items():
        now = file_state(Path(target))
        if now.exists != entry.original.exists or now.sha256 != entry.original.sha256:
            return False
    return True


def _finish(journal: jr.Journal, env: _Environment) -> None:
    """Nothing is patched any more: drop the pointer, then the backups and the snapshot (the
    journal stays as a record)."""
    fault_point("restore:before-cleanup")
    jr.clear_pointer(env.cache_dir)
    _unregister(env)
    jr.remove_backups(journal)
    discard(env.snapshot_folder)
    quiet.release()


# --- one session over an environment's files, whatever its state folder ---------------------------


def _registry(env: _Environment) -> Path | None:
    """Where sessions over this interpreter's own site-packages say so, whatever state folder each
    keeps its pointer in (a test's private ``cache_dir``): the environment's own state folder.
    None for other roots (a toy environment is its test's alone)."""
    if env.roots != jr.patchable_roots():
        return None
    return jr.state_dir(None) / "sessions"


def _register(env: _Environment) -> None:
    registry = _registry(env)
    if registry is None:
        return
    try:
        registry.mkdir(parents=True, exist_ok=True)
        atomic_write(registry / f"{_state_key(env)}.json", json.dumps({"state_dir": str(jr.state_dir(env.cache_dir))}).encode())
    except OSError:
        pass  # a registry we cannot write protects nothing, and must not stop the session


def _unregister(env: _Environment) -> None:
    registry = _registry(env)
    if registry is not None:
        (registry / f"{_state_key(env)}.json").unlink(missing_ok=True)


def _state_key(env: _Environment) -> str:
    return hashlib.sha256(str(jr.state_dir(env.cache_dir).resolve()).encode()).hexdigest()[:16]


def _refuse_a_second_session(env: _Environment) -> None:
    """Two sessions over the same files, each with its own snapshot, undo each other: one that began
    while the other's patches were in would put them back when it restores (it happened: a test's
    private session restored another's patches into transformers after that one had undone them)."""
    registry = _registry(env)
    if registry is None or not registry.is_dir():
        return
    mine = _state_key(env)
    for entry in sorted(registry.glob("*.json")):
        if entry.stem == mine:
            continue
        try:
            other = Path(json.loads(entry.read_text(encoding="utf-8"))["state_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        pointer = other / f"{jr.environment_key()}.json"
        if not pointer.is_file():
            entry.unlink(missing_ok=True)  # that session ended without saying so (killed after its restore)
            continue
        raise ApexUserError(f"another patch session is open over this environment (its state is in {other}); a second one "
                            "would undo its patches when it restores: restore that one first (apex patch restore, with "
                            f"APEX_PATCH_STATE_DIR={other} if it is not the environment's own)")


def _recover_locked(env: _Environment) -> tuple[jr.Journal | None, list[str]]:
    """With the lock held: undo what dead runs left; the live journal that remains (None when the
    session ended) and the ids rolled back. Raises what it cannot get past."""
    folder = jr.read_pointer(env.cache_dir)
    if folder is None:
        return None, []
    if not (folder / jr.JOURNAL_FILE).is_file():
        jr.clear_pointer(env.cache_dir)
        discard(env.snapshot_folder)
        return None, []
    journal = jr.read_journal(folder)
    jr.check_journal(journal, env.roots)
    dead = {r.id: why for r in journal.patches if (why := _dead(r)) is not None}
    rolled = _roll_back(journal, env, dead) if dead else []
    staying = [r for r in journal.active() if r.state != "restoring"]
    if not staying:
        restore_journal(journal, env)  # nothing is meant to stay: the session ends, the environment back to its snapshot
        return None, rolled
    stuck = [r.id for r in journal.active() if r.state == "restoring"]
    if stuck:
        raise RestoreError(f"patch(es) {', '.join(stuck)} could not be rolled back while {', '.join(r.id for r in staying)} "
                           f"stay applied; the journal {journal.folder} is kept")
    return journal, rolled


def _blocked(error: Exception) -> str:
    return (f"what an earlier apex run left in this environment cannot be undone: {error} -- patching is blocked until it "
            "is; apex patch status shows what differs, apex patch restore tries again, and apex patch restore --forget "
            "drops the session once you have put things back yourself")


def recover(cache_dir: Path | None = None, roots: Iterable[Path] | None = None) -> list[str]:
    """Undo what killed runs left in this environment; the ids rolled back.

    Cheap when nothing is patched (one failed file open), so every apex command calls it first. A
    session whose holder still runs (its lock is held) is left alone, and so are patches whose
    owning run is alive or that were applied on purpose. Raises RecoveryError (one line) when what
    was left cannot be undone; the caller reports it and goes on, and patching stays refused.
    """
    if jr.read_pointer(cache_dir) is None:
        return []
    quiet.hold()  # a session is open: this process and its children write no bytecode into it
    env = _environment(roots, cache_dir)
    lock = env.lock()
    try:
        if not lock.try_acquire():
            return []
    except OSError as error:
        if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise  # not ours to write (a confined session sees the environment read-only): the caller skips it
        raise RecoveryError(_blocked(f"the patch lock {lock.path} cannot be taken ({error.strerror})")) from None
    try:
        _, rolled = _recover_locked(env)
        return rolled
    except (jr.JournalError, RestoreError, SnapshotError) as error:
        raise RecoveryError(_blocked(error)) from None
    finally:
        lock.release()


def restore(cache_dir: Path | None = None, roots: Iterable[Path] | None = None, *, forget: bool = False) -> RestoreReport | None:
    """Undo every patch of this environment and bring it back to the session's snapshot
    (``apex patch restore``); None when no session is open. ``forget``: drop the session without
    writing anything (once the user has put back by hand what restore could not)."""
    if jr.read_pointer(cache_dir) is None:
        return None
    env = _environment(roots, cache_dir)
    lock = env.lock()
    lock.acquire("restore it")
    try:
        folder = jr.read_pointer(cache_dir)
        if forget:
            jr.clear_pointer(cache_dir)
            _unregister(env)
            discard(env.snapshot_folder)
            quiet.release()
            return RestoreReport(patches=[], files_restored=0, files_unchanged=0, journal=str(folder) if folder else None,
                                 forgotten=True)
        if folder is None or not (folder / jr.JOURNAL_FILE).is_file():
            jr.clear_pointer(cache_dir)
            discard(env.snapshot_folder)
            return None
        return restore_journal(jr.read_journal(folder), env)
    finally:
        lock.release()


def status(cache_dir: Path | None = None, roots: Iterable[Path] | None = None) -> jr.Journal | None:
    """This environment's live journal (what is patched, and how), or None; JournalError when the
    journal names files outside site-packages (so nothing is done from it)."""
    folder = jr.read_pointer(cache_dir)
    if folder is None or not (folder / jr.JOURNAL_FILE).is_file():
        return None
    journal = jr.read_journal(folder)
    jr.check_journal(journal, _environment(roots, cache_dir).roots)
    return journal


def environment_status(cache_dir: Path | None = None, roots: Iterable[Path] | None = None) -> EnvironmentStatus:
    """Everything that differs from what this environment was: the live patches, every change since
    the session began that no patch made (whoever made it), and outside a session the point files
    and startup files that differ from their packages' RECORDs."""
    from apex_core.patcher.integrity import unaccounted_changes

    env = _environment(roots, cache_dir)
    problem = None
    try:
        journal = status(cache_dir, roots)
    except jr.JournalError as error:
        journal, problem = None, str(error)
    differences: list[Difference] = []
    since = None
    if jr.read_pointer(cache_dir) is not None:
        try:
            snapshot = _load_snapshot(env)
        except SnapshotError as error:
            snapshot, problem = None, problem or str(error)
        if snapshot is not None:
            since = snapshot.header.created_at
            states = {p.id: p.state for p in journal.patches} if journal else {}
            live = [e for e in journal.entries if states.get(e.patch) != "restored"] if journal else []
            differences = snapshot.differences(env.watched, _original_hashes(journal) if journal else {},
                                               accounted=[e.target for e in live])
    lines = [f"{d.path}: {d.detail}; {d.way_back}" for d in differences]
    seen = {d.path for d in differences}
    integrity = [line for line in unaccounted_changes(journal, env.roots) if line.split(" ", 1)[0] not in seen]
    return EnvironmentStatus(patched=bool(journal and journal.active()), journal=journal, session_since=since,
                             differences=differences, unaccounted=integrity + lines, problem=problem)
