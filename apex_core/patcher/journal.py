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
undoing those patches. Applied patches stay until ``apex patch restore``
(or the end of the session that applied them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from apex_core.patcher.files import FileState, atomic_write

JOURNAL_FILE = "journal.json"
BACKUP_DIR = "backups"
FORMAT = 1

PatchState = Literal["open", "applied", "restoring", "restored"]


class PatchRecord(BaseModel):
    id: str
    task_id: str | None = None
    solution: str | None = None
    point: str | None = None
    """The patch point it was applied at (a later re-apply uses the same one)."""
    state: PatchState = "open"
    created_at: str
    note: str | None = Field(default=None, description="why it was rolled back, or what it replaced")


class JournalEntry(BaseModel):
    """One file a patch replaced (or created, or removed): its original state and backup copy."""

    patch: str
    target: str
    original: FileState
    backup: str | None = Field(default=None, description="file name under backups/, None when the target did not exist")
    folder_mtime_ns: int | None = Field(default=None, description="the target's folder's mtime before this change")


class Journal(BaseModel):
    format: int = FORMAT
    environment: str = Field(description="sys.prefix of the patched environment")
    folder: str = Field(description="where this journal and its backups live")
    owner_pid: int
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


def patchable_roots() -> list[Path]:
    """The folders a patch may write in: this environment's site-packages (pure and platform)."""
    roots = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    return sorted(roots)


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
    atomic_write(folder / JOURNAL_FILE, journal.model_dump_json(indent=1).encode())


def read_journal(folder: Path) -> Journal:
    return Journal.model_validate_json((folder / JOURNAL_FILE).read_bytes())


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
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = results_root / "patches" / f"{stamp}-{os.getpid()}"
    (folder / BACKUP_DIR).mkdir(parents=True, exist_ok=False)
    return folder
