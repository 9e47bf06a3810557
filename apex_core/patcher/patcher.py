"""Changing the installed stack's files under a write-ahead journal, and undoing every change.

The order of every replacement: the lock is held; the original is copied to the journal's
backups and flushed; the journal, naming the target, its original hash, mode and mtime and the
backup, is written atomically; only then is the target replaced atomically (and its bytecode
cache, journaled the same way, removed so Python cannot run stale code). A kill at any instant
leaves either an unchanged target or a journaled one, and ``recover`` (run at the start of every
apex command) puts back whatever an interrupted run left open. Restoring writes the backup over
the target atomically with its original mode and mtime, then checks its sha256 against the
journal; a mismatch is an error that keeps the journal and backups for a person to look at.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from apex_core.errors import ApexUserError
from apex_core.patcher import journal as jr
from apex_core.patcher.faults import fault_point
from apex_core.patcher.files import (
    atomic_write,
    bytecode_files,
    durable_copy,
    durable_unlink,
    file_state,
    stray_temporaries,
)
from apex_core.patcher.lock import EnvironmentLock


class RestoreError(ApexUserError):
    """A restored file does not match the journal: the journal and backups are kept."""


class RestoreReport(BaseModel):
    patches: list[str]
    files_restored: int
    files_unchanged: int
    journal: str


class Patcher:
    """One patching session of this environment; use it as a context manager.

    ``roots`` are the folders patches may write in (default: this interpreter's site-packages);
    ``cache_dir`` holds the lock and the pointer to the live journal (default: Apex's cache).
    """

    def __init__(self, results_root: Path, *, roots: Iterable[Path] | None = None, cache_dir: Path | None = None) -> None:
        self.results_root = Path(results_root)
        self.roots = sorted(Path(r).resolve() for r in (roots if roots is not None else jr.patchable_roots()))
        self.cache_dir = cache_dir
        self.lock = EnvironmentLock(jr.lock_path(cache_dir))
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
            folder = jr.read_pointer(self.cache_dir)
            if folder is not None and (folder / jr.JOURNAL_FILE).is_file():
                existing = jr.read_journal(folder)
                _roll_back_open(existing)  # a crashed run's leftovers, before anything new
                self.journal = existing.model_copy(update={"owner_pid": os.getpid()})
            else:
                folder = jr.new_journal_folder(self.results_root)
                self.journal = jr.Journal(environment=str(jr.environment_root()), folder=str(folder), owner_pid=os.getpid(),
                                          created_at=jr.now())
            jr.write_journal(self.journal)
            jr.write_pointer(self.journal, self.cache_dir)
        except BaseException:
            self.lock.release()
            raise
        if threading.current_thread() is threading.main_thread():
            # SIGTERM's default ends the process without unwinding; as SystemExit it runs close().
            self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)

    def close(self) -> None:
        """Release the lock; patches marked applied stay, open ones are rolled back first."""
        try:
            if self.journal is not None:
                _roll_back_open(self.journal)
                if not self.journal.active():
                    _finish(self.journal, self.cache_dir)
        finally:
            self.lock.release()
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)  # type: ignore[arg-type]
                self._previous_sigterm = None

    # --- patches ------------------------------------------------------------------------------

    def begin(self, *, task_id: str | None = None, solution: str | None = None, point: str | None = None) -> str:
        journal = self._journal()
        patch_id = f"p{len(journal.patches) + 1}-{secrets.token_hex(2)}"
        journal.patches.append(jr.PatchRecord(id=patch_id, task_id=task_id, solution=solution, point=point, created_at=jr.now()))
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

    def commit(self, patch_id: str, note: str | None = None) -> None:
        """The patch passed its checks: it stays until restored."""
        journal = self._journal()
        record = journal.patch(patch_id)
        record.state, record.note = "applied", note or record.note
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
        _restore_patch(journal, journal.patch(patch_id))
        journal.patch(patch_id).note = note
        jr.write_journal(journal)

    def restore_all(self) -> RestoreReport:
        journal = self._journal()
        return restore_journal(journal, self.cache_dir)

    # --- helpers ------------------------------------------------------------------------------

    def _journal(self) -> jr.Journal:
        if self.journal is None:
            raise RuntimeError("the patcher is not open")
        return self.journal

    def _check_writable(self, target: Path) -> None:
        root = next((r for r in self.roots if target.is_relative_to(r)), None)
        if root is None:
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
            durable_copy(target, Path(journal.folder) / jr.BACKUP_DIR / backup)
        fault_point("apply:after-backup")
        journal.entries.append(jr.JournalEntry(patch=patch_id, target=str(target), original=original, backup=backup,
                                               folder_mtime_ns=folder_mtime))
        jr.write_journal(journal)
        fault_point("apply:after-journal")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _restore_patch(journal: jr.Journal, record: jr.PatchRecord) -> tuple[int, int]:
    """Put back every file of one patch, newest first, and check each; (restored, unchanged)."""
    restored = unchanged = 0
    entries = journal.entries_of(record.id)
    for entry in reversed(entries):
        fault_point("restore:before-file")
        if _restore_entry(journal, entry):
            restored += 1
        else:
            unchanged += 1
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
    record.state = "restored"
    jr.write_journal(journal)
    return restored, unchanged


def _restore_entry(journal: jr.Journal, entry: jr.JournalEntry) -> bool:
    target = Path(entry.target)
    for stray in stray_temporaries(target.parent):
        if stray.name.startswith(f".{target.name}.apex-"):
            stray.unlink(missing_ok=True)
    current = file_state(target)
    if current == entry.original:
        return False
    if not entry.original.exists:
        durable_unlink(target)
    else:
        backup = Path(journal.folder) / jr.BACKUP_DIR / (entry.backup or "")
        if not backup.is_file():
            raise RestoreError(f"cannot restore {target}: its backup {backup} is missing; the journal {journal.folder} is kept")
        atomic_write(target, backup.read_bytes(), mode=entry.original.mode, mtime_ns=entry.original.mtime_ns,
                     before_rename=lambda: fault_point("restore:before-rename"))
    after = file_state(target)
    if after.exists != entry.original.exists or after.sha256 != entry.original.sha256:
        raise RestoreError(f"restored {target} but its sha256 is {after.sha256}, not the journal's {entry.original.sha256}; "
                           f"the journal and backups are kept in {journal.folder}")
    return True


def _roll_back_open(journal: jr.Journal) -> list[str]:
    """Restore the patches a run left open or half restored (crashed, or closed before committing)."""
    rolled = []
    for record in reversed(journal.patches):
        if record.state in ("open", "restoring"):
            _restore_patch(journal, record)
            record.note = record.note or "rolled back: its run ended before the patch was committed"
            rolled.append(record.id)
    if rolled:
        jr.write_journal(journal)
    return rolled


def _finish(journal: jr.Journal, cache_dir: Path | None) -> None:
    """Nothing is patched any more: drop the pointer, then the backups (the journal stays as a record)."""
    fault_point("restore:before-cleanup")
    jr.clear_pointer(cache_dir)
    shutil.rmtree(Path(journal.folder) / jr.BACKUP_DIR, ignore_errors=True)


def restore_journal(journal: jr.Journal, cache_dir: Path | None = None) -> RestoreReport:
    # First say so in the journal: a restore killed half-way is then finished by the next command.
    for record in journal.active():
        record.state = "restoring"
    jr.write_journal(journal)
    restored = unchanged = 0
    patches = []
    for record in reversed(journal.patches):
        if record.state == "restored":
            continue
        done, same = _restore_patch(journal, record)
        restored, unchanged, patches = restored + done, unchanged + same, [*patches, record.id]
    _finish(journal, cache_dir)
    return RestoreReport(patches=patches, files_restored=restored, files_unchanged=unchanged, journal=journal.folder)


def recover(cache_dir: Path | None = None) -> list[str]:
    """Roll back what a crashed patcher left open in this environment; the ids rolled back.

    Cheap when nothing is patched (one failed file open), so every apex command calls it first.
    A journal whose owner still runs (its lock is held) is left alone.
    """
    folder = jr.read_pointer(cache_dir)
    if folder is None:
        return []
    lock = EnvironmentLock(jr.lock_path(cache_dir))
    if not lock.try_acquire():
        return []
    try:
        if not (folder / jr.JOURNAL_FILE).is_file():
            jr.clear_pointer(cache_dir)
            return []
        journal = jr.read_journal(folder)
        rolled = _roll_back_open(journal)
        if not journal.active():
            _finish(journal, cache_dir)
        return rolled
    finally:
        lock.release()


def restore(cache_dir: Path | None = None) -> RestoreReport | None:
    """Undo every patch of this environment (``apex patch restore``); None when nothing is patched."""
    if jr.read_pointer(cache_dir) is None:
        return None
    lock = EnvironmentLock(jr.lock_path(cache_dir))
    lock.acquire("restore it")
    try:
        folder = jr.read_pointer(cache_dir)
        if folder is None or not (folder / jr.JOURNAL_FILE).is_file():
            jr.clear_pointer(cache_dir)
            return None
        return restore_journal(jr.read_journal(folder), cache_dir)
    finally:
        lock.release()


def status(cache_dir: Path | None = None) -> jr.Journal | None:
    """This environment's live journal (what is patched, and how), or None."""
    folder = jr.read_pointer(cache_dir)
    if folder is None or not (folder / jr.JOURNAL_FILE).is_file():
        return None
    return jr.read_journal(folder)
