"""What the installed packages say their files are, and the changes no journal accounts for.

The journal is how the patcher knows what it changed, and a session's snapshot (``snapshot.py``)
how it knows what anyone else changed while it was open. Outside a session neither exists, so a
patched file it does not know about (a journal lost with its results folder, a copy of a patched
environment, a hand edit, a run before snapshots existed) is found here: each installed point's
module against the hash its distribution's RECORD holds, the adapter copies (``_apex_patch_*``)
beside it, and the files Python runs at every start (``*.pth``, ``sitecustomize.py``,
``usercustomize.py`` at the top of site-packages) against the RECORDs. ``apex patch status``
reports them, so an environment never runs patched code while saying it does not.

The RECORDs also tell a snapshot's restore whether a file it could not bring back has the bytes
its package installed, and which package to reinstall when it has not (``RecordIndex``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import sys
from pathlib import Path
from typing import NamedTuple

from apex_core.patcher.journal import Journal
from apex_core.patcher.points import POINTS

COPY_PREFIX = "_apex_patch_"
STARTUP_NAMES = ("sitecustomize.py", "usercustomize.py")
"""Besides ``*.pth``: the modules ``site`` imports at every interpreter start."""


class Recorded(NamedTuple):
    distribution: str
    version: str
    sha256: str | None
    """Hex sha256 from RECORD; None where RECORD lists the file without one (bytecode, RECORD itself)."""


def _metadata_field(metadata: Path, field: str) -> str | None:
    try:
        with metadata.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    break  # the headers end at the first blank line
                if line.startswith(f"{field}:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _decoded(field: str) -> str | None:
    if not field.startswith("sha256="):
        return None
    value = field[len("sha256="):]
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except ValueError:
        return None


class RecordIndex:
    """What the distributions installed in ``roots`` list in their RECORDs, looked up by absolute path.

    Read from the ``*.dist-info`` folders at the top of each root (not through importlib, so that a
    toy environment's own RECORDs count and nothing outside the roots does). A venv's RECORDs list
    some 50,000 files and a lookup wants a handful, so each lookup searches the RECORDs' text for
    the file's line instead of parsing every row (a few milliseconds, against a quarter of a second)."""

    FULL_PARSE_ABOVE = 200
    """From this many files looked up, every row is parsed once instead."""

    def __init__(self, roots: list[Path], records: dict[str, str] | None = None) -> None:
        """``records``: RECORD texts by path, read earlier (a snapshot's copies), used instead of the
        files now: a RECORD edited since would otherwise vouch for the edit."""
        self.roots = roots
        self._records: list[tuple[Path, str, str, str]] = []  # (root, distribution, version, RECORD text)
        self._parsed: dict[str, Recorded] | None = None
        self._lookups = 0
        for root in roots:
            try:
                names = sorted(os.listdir(root))
            except OSError:
                continue
            for name in names:
                if not name.endswith(".dist-info"):
                    continue
                info, stem = root / name, name.removesuffix(".dist-info")
                if records is not None:
                    if str(info / "RECORD") not in records:
                        continue
                    text = records[str(info / "RECORD")]
                else:
                    try:
                        text = (info / "RECORD").read_text(encoding="utf-8", errors="surrogateescape")
                    except OSError:
                        continue
                distribution = _metadata_field(info / "METADATA", "Name") or stem.rsplit("-", 1)[0]
                version = _metadata_field(info / "METADATA", "Version") or stem.rsplit("-", 1)[-1]
                self._records.append((root, distribution, version, "\n" + text))

    def get(self, path: Path | str) -> Recorded | None:
        return self.lookup([path]).get(os.path.normpath(str(path)))

    def lookup(self, paths: list[Path | str]) -> dict[str, Recorded]:
        """The RECORD row of each of ``paths`` that one lists, by normalized absolute path."""
        wanted = [os.path.normpath(str(p)) for p in paths]
        self._lookups += len(wanted)
        if self._lookups > self.FULL_PARSE_ABOVE:
            parsed = self._parse_all()
            return {p: parsed[p] for p in wanted if p in parsed}
        found: dict[str, Recorded] = {}
        for path in wanted:
            for root, distribution, version, text in self._records:
                relative = os.path.relpath(path, root)  # ../../../bin/x for a script, as RECORD writes it
                if "," in relative or '"' in relative:  # quoted in RECORD: read it properly
                    parsed = self._parse_all()
                    if path in parsed:
                        found[path] = parsed[path]
                    break
                at = text.find(f"\n{relative},")
                if at >= 0:
                    line = text[at + 1:text.find("\n", at + 1) if text.find("\n", at + 1) >= 0 else len(text)]
                    fields = line.rsplit(",", 2)
                    found[path] = Recorded(distribution, version, _decoded(fields[1]) if len(fields) > 1 else None)
                    break
        return found

    def _parse_all(self) -> dict[str, Recorded]:
        if self._parsed is None:
            self._parsed = {}
            for root, distribution, version, text in self._records:
                for row in csv.reader(text.splitlines()):
                    if row and row[0]:
                        self._parsed[os.path.normpath(os.path.join(root, row[0]))] = Recorded(
                            distribution, version, _decoded(row[1]) if len(row) > 1 else None)
        return self._parsed


def reinstall_command(recorded: Recorded) -> str:
    """The exact command that puts a distribution's files back as it installed them."""
    return f"{sys.executable} -m pip install --force-reinstall --no-deps '{recorded.distribution}=={recorded.version}'"


def startup_changes(roots: list[Path], index: RecordIndex | None = None) -> list[str]:
    """One line per file Python runs at every start (top-level ``*.pth``, sitecustomize,
    usercustomize) that no installed distribution lists, or whose bytes differ from its RECORD."""
    found: list[str] = []
    for root in roots:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            path = root / name
            if not (name.endswith(".pth") or name in STARTUP_NAMES) or not path.is_file():
                continue
            index = index or RecordIndex(roots)
            recorded = index.get(path)
            if recorded is None:
                found.append(f"{path} runs at every Python start and no installed package lists it")
            elif recorded.sha256 is not None and hashlib.sha256(path.read_bytes()).hexdigest() != recorded.sha256:
                found.append(f"{path} runs at every Python start and differs from what {recorded.distribution} installed "
                             f"(reinstall it: {reinstall_command(recorded)})")
    return found


def _point_file(module: str, roots: list[Path]) -> Path | None:
    """A point's module file in ``roots``, found from its name alone: finding it through importlib
    would import its parent packages, running the very code status is asked to vouch for (and
    taking seconds for transformers). A module installed elsewhere is not this environment's."""
    relative = Path(*module.split(".")).with_suffix(".py")
    for root in roots:
        candidate = root / relative
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def unaccounted_changes(journal: Journal | None, roots: list[Path] | None = None) -> list[str]:
    """One line per point file that differs from its installed state, adapter copy or startup file
    (in ``roots``, default: this environment's site-packages) that the live journal does not list."""
    from apex_core.patcher.journal import patchable_roots

    roots = roots if roots is not None else patchable_roots()
    journaled = {entry.target for entry in journal.entries} if journal is not None and journal.active() else set()
    index = RecordIndex(roots)
    found: list[str] = []
    seen: set[Path] = set()
    for point in POINTS:
        target = _point_file(point.module, roots)
        if target is None or target in seen:
            continue
        seen.add(target)
        if str(target) not in journaled:
            recorded = index.get(target)
            if recorded is not None and recorded.sha256 is not None and hashlib.sha256(target.read_bytes()).hexdigest() != recorded.sha256:
                found.append(f"{target} differs from what its package installed, and no patch journal lists it")
        for copy in sorted(target.parent.glob(f"{COPY_PREFIX}*")):
            if str(copy) not in journaled:
                found.append(f"{copy} is a patch's solution copy that no patch journal lists")
        for compiled in sorted((target.parent / "__pycache__").glob(f"{COPY_PREFIX}*.pyc")):
            source = target.parent / (compiled.name.split(".", 1)[0] + ".py")
            if str(source) not in journaled:
                found.append(f"{compiled} is bytecode of a patch's solution copy that no patch journal lists (nothing imports it once the copy is gone: rm it)")
    found.extend(line for line in startup_changes(roots, index) if line.split(" ", 1)[0] not in journaled)
    return found
