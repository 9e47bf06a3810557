"""The write-ahead journal: what the patcher is about to change, written before it changes it.

One journal per Python environment (the site-packages a patch may touch), found through a pointer
kept in the environment (``<sys.prefix>/.apex-patch/``) so that any later apex command, run from
any folder, by any user, with any APEX_CACHE_DIR, finds it. The
journal itself lives under the results folder of the run that patched, with a backup copy of
every file it replaced.

Each patch (one task's solution) has a state: ``open`` while it is being applied or checked,
``applied`` once its checks passed and it is meant to stay, ``restoring`` once a restore has
begun, ``restored`` when it was undone. A journal with an open or restoring patch and no live
owner (the owner's lock is free) is the trace of a crash: the next apex command finishes
undoing those patches. A patch a run applied for itself (``owner`` set: the final benchmark, the
pipeline) is undone, whatever its state, once that process is gone; one applied on purpose
(``apex patch apply``, no owner) stays until ``apex patch restore``.

The journal is data that code of the same user could have written (a patched solution ran with
that user's rights), so nothing in it is trusted for a write: its folder is the one its pointer
names, never the folder it claims; every target must resolve inside this environment's
site-packages (``check_journal``); a backup is written back only once its sha256 matches the
journal's (``patcher.py``); and only backups named as the patcher names them are ever deleted.
Journals and backups are kept in 0700 folders.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import secrets
import sys
import sysconfig
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from apex_core.errors import ApexUserError
from apex_core.patcher.files import FileState, NanoTimestamp, atomic_write
from apex_core.patcher.lock import ProcessIdentity

JOURNAL_FILE = "journal.json"
BACKUP_DIR = "backups"
FORMAT = 1

PatchState = Literal["open", "applied", "restoring", "restored"]
BACKUP_NAME = re.compile(r"^[0-9]{4,}-[^/\\\x00]+$")
"""How the patcher names a backup (``0007-modeling_llama.py``): a plain name in backups/, never a path."""


class JournalError(ApexUserError):
    """A journal that cannot be read or must not be acted on: nothing was written."""


class PatchRecord(BaseModel):
    id: str
    task_id: str | None = None
    solution: str | None = None
    point: str | None = None
    """The patch point it was applied at (a later re-apply uses the same one)."""
    state: PatchState = "open"
    owner: ProcessIdentity | None = Field(
        default=None, description="the run that applied it for itself: undone once that process is gone, whatever its state; "
                                  "None when applied on purpose (apex patch apply), which stays until apex patch restore")
    created_at: str
    note: str | None = Field(default=None, description="why it was rolled back, or what it replaced")
    sha256: str | None = Field(default=None, description="of the solution's bytes as they were patched in")
    checked: Literal["confined", "unconfined"] | None = Field(
        default=None, description="how its in-model check ran when it passed: a later arm of the final benchmark "
                                  "that re-applies exactly these bytes at this point need not check them again")


class JournalEntry(BaseModel):
    """One file a patch replaced (or created, or removed): its original state and backup copy."""

    patch: str
    target: str
    original: FileState
    backup: str | None = Field(default=None, description="file name under backups/, None when the target did not exist")
    folder_mtime_ns: NanoTimestamp | None = Field(default=None, description="the target's folder's mtime before this change")


class Journal(BaseModel):
    format: int = FORMAT
    environment: str = Field(description="sys.prefix of the patched environment")
    folder: str = Field(description="where this journal and its backups live")
    owner_pid: int
    owner: ProcessIdentity | None = Field(default=None, description="the process whose session last opened it")
    created_at: str
    patches: list[PatchRecord] = Field(default_factory=list)
    entries: list[JournalEntry] = Field(default_factory=list)

    def patch(self, patch_id: str) -> PatchRecord:
        return next(p for p in self.patches if p.id == patch_id)

    def active(self) -> list[PatchRecord]:
        return [p for p in self.patches if p.state != "restored"]

    def entries_of(self, patch_id: str) -> list[JournalEntry]:
        return [e for e in self.entries if e.patch == patch_id]


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def environment_root() -> Path:
    return Path(sys.prefix).resolve()


ROOTS_ENV = "APEX_PATCH_ROOTS"
"""Folders (os.pathsep-separated) that stand for site-packages: set only on purpose, by tests of toy
environments, for every command of that environment (a restore writes nowhere else)."""


def patchable_roots() -> list[Path]:
    """The folders a patch may write in: this environment's site-packages (pure and platform)."""
    chosen = os.environ.get(ROOTS_ENV)
    if chosen:
        return sorted({Path(r).resolve() for r in chosen.split(os.pathsep) if r})
    roots = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    return sorted(roots)


def inside(path: Path | str, roots: list[Path]) -> bool:
    """Whether ``path``, every link in it resolved (the last one too), lies inside one of ``roots``.
    Both the path as written and as resolved must: a name inside whose link leads out is outside."""
    written = Path(os.path.abspath(path))
    resolved = Path(os.path.realpath(path))
    return any(written.is_relative_to(r) and written != r for r in roots) and \
        any(resolved.is_relative_to(r) and resolved != r for r in roots)


def environment_key() -> str:
    return hashlib.sha256(str(environment_root()).encode()).hexdigest()[:16]


STATE_DIR = ".apex-patch"
STATE_DIR_ENV = "APEX_PATCH_STATE_DIR"
"""Set only on purpose (tests of toy environments): every command of one environment must agree on it."""


def state_dir(cache_dir: Path | None = None) -> Path:
    """Where the environment's lock and the pointer to its live journal are: ``<sys.prefix>/.apex-patch/``
    (``<cache_dir>/patches/`` when one is given, as tests of toy environments do).

    In the environment itself, beside (not in) its site-packages, so that every apex command run
    with this interpreter finds them, whatever its APEX_CACHE_DIR or user: a pointer kept in a
    cache a later command does not read would leave a patched environment that says it is not."""
    if cache_dir is not None:
        return cache_dir / "patches"
    chosen = os.environ.get(STATE_DIR_ENV)
    return Path(chosen) if chosen else environment_root() / STATE_DIR


def pointer_path(cache_dir: Path | None = None) -> Path:
    return state_dir(cache_dir) / f"{environment_key()}.json"


def lock_path(cache_dir: Path | None = None) -> Path:
    return state_dir(cache_dir) / f"{environment_key()}.lock"


def write_journal(journal: Journal) -> None:
    folder = Path(journal.folder)
    atomic_write(folder / JOURNAL_FILE, journal.model_dump_json(indent=1).encode(), mode=0o600)


def read_journal(folder: Path) -> Journal:
    """The journal in ``folder``, its ``folder`` field set to where it was read (what it claims is
    not used: a journal naming another folder would have us write there); one line when unreadable."""
    path = folder / JOURNAL_FILE
    try:
        journal = Journal.model_validate_json(path.read_bytes())
    except OSError as error:
        raise JournalError(f"the patch journal {path} cannot be read ({error.strerror})") from None
    except ValidationError as error:
        first = error.errors()[0]
        raise JournalError(f"the patch journal {path} is not a journal ({'.'.join(map(str, first['loc']))}: "
                           f"{first['msg']})") from None
    return journal.model_copy(update={"folder": str(folder)})


def check_journal(journal: Journal, roots: list[Path]) -> None:
    """Refuse, before anything is written, a journal whose targets or backups lie where the
    patcher never puts them: a planted journal must not steer a restore at any other file."""
    folder = Path(journal.folder)
    try:
        info = folder.stat()
    except OSError as error:
        raise JournalError(f"the patch journal's folder {folder} cannot be read ({error.strerror})") from None
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise JournalError(f"the patch journal's folder {folder} belongs to user id {info.st_uid} or others can write it "
                           f"(mode {info.st_mode & 0o777:o}); apex writes its journals in 0700 folders of its own user, so "
                           "this one is not acted on")
    for entry in journal.entries:
        if not inside(entry.target, roots):
            raise JournalError(f"the patch journal {folder} names {entry.target}, outside this environment's site-packages "
                               f"({', '.join(map(str, roots))}): a patch never writes there, so nothing was restored from it")
        if entry.backup is not None and not BACKUP_NAME.match(entry.backup):
            raise JournalError(f"the patch journal {folder} names the backup {entry.backup!r}, not a backup file name of "
                               "apex's (NNNN-name): nothing was restored from it")


def remove_backups(journal: Journal) -> None:
    """Delete the journal's backups: only the files it names, in its own backups folder."""
    backups = Path(journal.folder) / BACKUP_DIR
    for entry in journal.entries:
        if entry.backup is not None and BACKUP_NAME.match(entry.backup):
            (backups / entry.backup).unlink(missing_ok=True)
    try:
        backups.rmdir()
    except OSError:
        pass  # something else in it: not ours to delete


def write_pointer(journal: Journal, cache_dir: Path | None = None) -> None:
    path = pointer_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"journal": journal.folder, "environment": journal.environment}).encode())


def read_pointer(cache_dir: Path | None = None) -> Path | None:
    """The folder of this environment's live journal, or None when nothing is patched."""
    try:
        data = json.loads(pointer_path(cache_dir).read_text(encoding="utf-8"))
        return Path(data["journal"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def clear_pointer(cache_dir: Path | None = None) -> None:
    try:
        pointer_path(cache_dir).unlink()
    except FileNotFoundError:
        pass


def new_journal_folder(results_root: Path) -> Path:
    """A new 0700 folder for a journal and its backups (the backups hold the stack's original bytes,
    which a restore writes back: no other user may swap them)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = results_root / "patches" / f"{stamp}-{os.getpid()}-{secrets.token_hex(2)}"  # two sessions may begin in one second
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=0o700)
    (folder / BACKUP_DIR).mkdir(mode=0o700)
    for made in (folder, folder / BACKUP_DIR):
        os.chmod(made, 0o700)  # mkdir's mode passes through the umask; 0700 only ever narrows it
    return folder
