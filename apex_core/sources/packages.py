"""Which packages the index reads, and where each is installed, found without importing it.

The inference stack is named once here (``DEFAULT_PACKAGES``). A package that is not installed is
skipped, not an error: vLLM, SGLang and aiter exist only on some machines. Locating a package
uses ``importlib.util.find_spec`` on the top-level name, which finds the directory without running
the package's ``__init__``; the version comes from the installed distribution's metadata.

Source checkouts are indexed too: each folder under ``third_party/sources/`` (or the folder
``APEX_SOURCE_CHECKOUTS`` names) is a package named ``checkout:<folder>`` whose version is its git
commit, so a new commit re-keys its cache exactly as a new package version does. The commit is
read from ``.git`` (HEAD, loose refs, packed-refs) without running git; ``git rev-parse`` is the
fallback for layouts the files do not answer (reftable). ``setup.sh`` clones the public ROCm
repositories of ``checkouts.toml`` there (``apex_core.sources.checkouts``). A checkout folder must
really lie inside the checkouts folder: one that is a link to elsewhere (``aiter -> /``) is left
out with a warning, since its tree would make everything under the link's target readable.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from apex_core.sources.real_paths import is_inside, real_root

DEFAULT_PACKAGES: tuple[str, ...] = ("torch", "triton", "transformers", "liger_kernel", "fla", "vllm", "sglang", "aiter")
"""Top-level import names of the inference stack whose kernels the identifier can point at."""

CHECKOUTS_ENV = "APEX_SOURCE_CHECKOUTS"
DEFAULT_CHECKOUTS_DIR = Path(__file__).resolve().parents[2] / "third_party" / "sources"
"""Where ``setup.sh`` puts source checkouts (git-ignored); ``APEX_SOURCE_CHECKOUTS`` overrides it."""
CHECKOUT_PREFIX = "checkout:"
UNVERSIONED = "unversioned"
"""The version of a checkout folder that is not a git repository (its files are still indexed)."""
_GIT_TIMEOUT_S = 10.0
log = logging.getLogger(__name__)
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class PackageSource(BaseModel):
    """One tree to index: an installed package (import name, installed version, directory) or a
    source checkout (``checkout:<folder>``, its git commit, its folder)."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    root: Path
    kind: Literal["installed", "checkout"] = "installed"


@lru_cache(maxsize=1)
def _distributions_by_top_level() -> dict[str, list[str]]:
    return {name: list(dists) for name, dists in importlib.metadata.packages_distributions().items()}


def distributions_of(name: str) -> list[str]:
    """The installed distributions that provide top-level import name ``name``."""
    return list(_distributions_by_top_level().get(name, []))


def package_version(name: str) -> str:
    """The installed distribution's version for import name ``name`` ('unknown' if it has none)."""
    for dist in distributions_of(name) + [name, name.replace("_", "-")]:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def package_root(name: str) -> Path | None:
    """The folder of import name ``name`` (its file for a one-module distribution), found without
    running the package; None when it is not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return Path(spec.origin).resolve()  # a single-module distribution: the index reads just this file
    return None


def installed_package(name: str) -> PackageSource | None:
    """Where import name ``name`` lives on this machine, or None when it is not installed."""
    root = package_root(name)
    return None if root is None else PackageSource(name=name, version=package_version(name), root=root)


def installed_packages(names: tuple[str, ...] | list[str] = DEFAULT_PACKAGES) -> tuple[list[PackageSource], list[str]]:
    """The installed ones of ``names`` and the names that were skipped as absent."""
    found: list[PackageSource] = []
    skipped: list[str] = []
    for name in names:
        package = installed_package(name)
        if package is None:
            skipped.append(name)
        else:
            found.append(package)
    return found, skipped


def checkouts_dir() -> Path:
    """The folder holding source checkouts: ``$APEX_SOURCE_CHECKOUTS``, else third_party/sources."""
    configured = os.environ.get(CHECKOUTS_ENV, "").strip()
    return Path(configured).expanduser() if configured else DEFAULT_CHECKOUTS_DIR


def source_checkouts(root: Path | None = None) -> list[PackageSource]:
    """Each folder under ``root`` (default :func:`checkouts_dir`) as a ``checkout:<name>`` package
    versioned by its git commit; hidden folders (a clone in progress) are left out, and so, with a
    warning, is a folder that is a link to a place outside ``root``."""
    root = checkouts_dir() if root is None else root
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []  # no checkouts folder: nothing was downloaded here
    found = []
    for folder in folders:
        if not lies_inside(folder, root):
            log.warning("source checkout %s is left out: it is a link to %s, outside %s; put the checkout itself there",
                        folder, os.path.realpath(folder), root)
            continue
        found.append(PackageSource(name=f"{CHECKOUT_PREFIX}{folder.name}", version=git_commit(folder) or UNVERSIONED,
                                   root=Path(real_root(folder)), kind="checkout"))
    return found


def lies_inside(folder: Path, checkouts: Path) -> bool:
    """Whether the checkout ``folder`` really lies inside the checkouts folder, links resolved
    (a link to another folder inside it is fine; one to the checkouts folder itself is not)."""
    real, base = real_root(folder), real_root(checkouts)
    return real != base and is_inside(real, base)


def git_commit(folder: Path) -> str | None:
    """The commit checked out in ``folder`` (full hash), or None when it is not a git work tree."""
    git_dir = _git_dir(folder)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if _SHA.fullmatch(head):
        return head  # a detached HEAD, as a shallow clone of a tag or commit leaves it
    if head.startswith("ref: "):
        found = _read_ref(git_dir, head[5:].strip())
        if found is not None:
            return found
    return _rev_parse(folder)


def _git_dir(folder: Path) -> Path | None:
    dot_git = folder / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
        try:
            text = dot_git.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if text.startswith("gitdir:"):
            return (folder / text[len("gitdir:"):].strip()).resolve()
    return None


def _read_ref(git_dir: Path, ref: str) -> str | None:
    """A branch's commit from its loose ref file or from packed-refs (in the common dir of a worktree)."""
    directories = [git_dir]
    try:
        directories.append((git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve())
    except OSError:
        pass
    for directory in directories:
        try:
            value = (directory / ref).read_text(encoding="utf-8").strip()
        except OSError:
            value = ""
        if _SHA.fullmatch(value):
            return value
        try:
            packed = (directory / "packed-refs").read_text(encoding="utf-8")
        except OSError:
            continue
        for line in packed.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                return parts[0]
    return None


def _rev_parse(folder: Path) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run([git, "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and _SHA.fullmatch(value) else None
