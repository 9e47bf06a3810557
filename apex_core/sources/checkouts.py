"""Optional source checkouts: fetching the public ROCm repositories of ``checkouts.toml``.

Agents learn kernels from more than the installed packages: AMD's own HIP and Triton kernels
(aiter), its HIP examples, Composable Kernel's tile examples. ``checkouts.toml`` lists them (folder
name, URL, the folders worth having, what it is); ``setup.sh`` runs ``python -m
apex_core.sources.checkouts`` without ``--skip-downloads``, and the source index reads whatever is
present under the checkouts folder (``packages.source_checkouts``).

Fetching is a shallow clone (``--depth 1``), sparse where the entry names folders (``--filter=
blob:none --sparse`` then ``git sparse-checkout set``), so a repository of several GB costs only
the folders asked for. It never fails set-up: without git or a network each entry is reported
as skipped with the reason, and once a host cannot be reached its other entries are skipped at
once instead of each waiting. A clone is made in a hidden folder and renamed when complete, so a
broken clone never looks like a checkout; a checkout already present is left alone. A folder of
that name which is a link to a place outside the checkouts folder is reported, not used: the index
leaves it out (``packages.source_checkouts``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from apex_core.errors import ApexUserError
from apex_core.manifests import read_entries
from apex_core.sources.packages import checkouts_dir, lies_inside


MANIFEST_FILE = Path(__file__).with_name("checkouts.toml")
CLONE_TIMEOUT_S = 900.0
_UNREACHABLE = re.compile(r"could not resolve host|unable to access|failed to connect|couldn't connect|network is unreachable"
                          r"|connection timed out|operation timed out|could not read from remote", re.I)


class CheckoutSource(BaseModel):
    """One public repository to check out: its folder name, URL, folders, and what it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the folder under the checkouts folder; the index names it checkout:<name>")
    url: str
    what: str
    sparse: tuple[str, ...] = Field(default=(), description="folders to check out; empty: the whole tree")
    branch: str | None = Field(default=None, description="a branch or tag; default: the repository's default branch")
    fetched_here: bool = False

    @field_validator("name")
    @classmethod
    def _folder_name(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise ValueError(f"{name!r} is not a plain folder name (letters, digits, '.', '_', '-')")
        return name

    @field_validator("url")
    @classmethod
    def _clonable(cls, url: str) -> str:
        if urlparse(url).scheme not in ("https", "file"):
            raise ValueError(f"{url!r} is neither an https nor a file URL")
        return url

    @field_validator("sparse")
    @classmethod
    def _relative_folders(cls, folders: tuple[str, ...]) -> tuple[str, ...]:
        for folder in folders:
            path = PurePosixPath(folder)
            if path.is_absolute() or ".." in path.parts or not folder.strip():
                raise ValueError(f"sparse folder {folder!r} must be a path inside the repository")
        return folders


class CheckoutReport(BaseModel):
    cloned: list[str] = []
    present: list[str] = []
    failed: dict[str, str] = {}


def read_checkouts(path: Path = MANIFEST_FILE) -> list[CheckoutSource]:
    """The manifest's entries; a malformed manifest is a user error naming the file."""
    return read_entries(path, "checkout", CheckoutSource, what="checkouts", help_hint="see the comment at its top",
                        unique="folder name")


def fetch_checkouts(entries: list[CheckoutSource], folder: Path | None = None, timeout_s: float = CLONE_TIMEOUT_S) -> CheckoutReport:
    """Clone the entries not yet in ``folder`` (default: the checkouts folder); never raises for
    a missing git or network, it reports them."""
    folder = checkouts_dir() if folder is None else folder
    report = CheckoutReport()
    git = shutil.which("git")
    unreachable: set[str] = set()
    for entry in entries:
        target = folder / entry.name
        if target.is_symlink() and not lies_inside(target, folder):
            report.failed[entry.name] = (f"{target} is a link to {os.path.realpath(target)}, outside {folder}, so the index "
                                         "leaves it out; remove the link and run again")
            continue
        if target.exists():
            report.present.append(entry.name)
            continue
        host = urlparse(entry.url).netloc
        if git is None:
            report.failed[entry.name] = "git is not installed"
        elif host and host in unreachable:
            report.failed[entry.name] = f"{host} could not be reached"
        else:
            failure = _clone(git, entry, folder, timeout_s)
            if failure is None:
                report.cloned.append(entry.name)
            else:
                report.failed[entry.name] = failure
                if _UNREACHABLE.search(failure):
                    unreachable.add(host)
    return report


def _clone(git: str, entry: CheckoutSource, folder: Path, timeout_s: float) -> str | None:
    """Clone one entry into ``folder/<name>`` by way of a hidden folder; the failure, or None."""
    partial = folder / f".{entry.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    clone = [git, "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60", "clone", "--quiet", "--depth", "1"]
    if entry.branch:
        clone += ["--branch", entry.branch]
    if entry.sparse:
        clone += ["--filter=blob:none", "--sparse"]
    steps = [[*clone, entry.url, str(partial)]]
    if entry.sparse:
        steps.append([git, "-C", str(partial), "sparse-checkout", "set", *entry.sparse])
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=timeout_s, env=environment, check=False)
            if done.returncode != 0:
                lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
                return (lines[-1] if lines else f"git exited with {done.returncode}")[:300]
        partial.rename(folder / entry.name)
        return None
    except subprocess.TimeoutExpired:
        return f"git took more than {timeout_s:.0f} s (connection timed out?)"
    except OSError as error:
        return str(error)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m apex_core.sources.checkouts [--skip-downloads] [--folder DIR]``, for setup.sh."""
    parser = argparse.ArgumentParser(description="Clone the public ROCm source trees of apex_core/sources/checkouts.toml.")
    parser.add_argument("--skip-downloads", action="store_true", help="clone nothing; list what is present")
    parser.add_argument("--folder", type=Path, default=None, help="default: $APEX_SOURCE_CHECKOUTS, else third_party/sources/")
    args = parser.parse_args(argv)
    folder = args.folder or checkouts_dir()
    try:
        entries = read_checkouts()
    except ApexUserError as error:
        print(f"source checkouts: error: {error}", file=sys.stderr)
        return 2
    if args.skip_downloads:
        present = [entry.name for entry in entries if (folder / entry.name).exists() and lies_inside(folder / entry.name, folder)]
        print(f"source checkouts: downloads skipped (--skip-downloads); {len(present)} of {len(entries)} present in {folder}")
        return 0
    report = fetch_checkouts(entries, folder)
    print(f"source checkouts: {len(report.cloned)} cloned, {len(report.present)} already here, in {folder}")
    for name, reason in report.failed.items():
        print(f"source checkouts: skipped {name}: {reason} (no network? run again where there is one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
