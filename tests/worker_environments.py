"""A Python environment of its own for each xdist worker, so that tests which patch the installed
stack (marked ``site_packages``) run side by side instead of one at a time on one worker.

The patcher writes into the site-packages of the interpreter that runs it and keeps its journal
beside ``sys.prefix``; one environment has one patcher at a time. Each worker therefore runs under
a small virtual environment of its own (execnet's ``popen//python=...``):

- its site-packages holds fresh copies of the packages a patch point writes into (transformers,
  and Liger or fla where installed), with their ``dist-info``, made anew for every session, so a
  test killed half-way through a patch can leave nothing behind for the next session;
- a ``.pth`` file adds the main environment's site-packages after them (everything else: torch,
  pytest, Apex itself as an editable install), owned by a one-file distribution so that the
  patcher's startup-file check sees an installed file, as it would in a user's venv;
- its ``bin/`` has the main environment's console scripts, pointed at the worker's interpreter.

Workers' children (the CLI, graders, confined sandboxes) start ``sys.executable`` and so stay in
the worker's environment. Outside xdist the tests run in the main environment as before.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import sys
import sysconfig
import venv
from pathlib import Path

from apex_core.grader.isolation.scratch import process_alive

MARKER = "apex-test-worker.txt"
"""In each worker environment's root: how a worker knows it has an environment of its own."""

PATCHED_PACKAGES = ("transformers", "liger_kernel", "fla")
"""The top-level packages patch points write into (apex_core.patcher.points); those installed are copied."""

OVERLAY = "apex_test_worker_env"


def in_worker_environment() -> bool:
    return (Path(sys.prefix) / MARKER).is_file()


def put_own_site_first() -> None:
    """In a worker: its own site-packages before the main environment's on ``sys.path``.

    xdist hands a local worker the controller's ``sys.path`` whole, which has the main
    site-packages and not the worker's; without this the worker itself would import the main
    environment's transformers while the patches it makes go into its own copy."""
    if not in_worker_environment():
        return
    own = str(Path(sysconfig.get_paths()["purelib"]))
    if own in sys.path:
        sys.path.remove(own)
    main = [i for i, entry in enumerate(sys.path) if entry.rstrip("/").endswith("site-packages")]
    sys.path.insert(main[0] if main else len(sys.path), own)


def build(count: int, parent: Path) -> list[Path]:
    """``count`` worker environments in a folder of this session under ``parent``; their
    interpreters. Another session's folder is left alone while its pytest runs (two suites at once
    in one checkout) and removed once it is gone."""
    _remove_finished_sessions(parent)
    session = parent / f"session-{os.getpid()}"
    main_site = Path(sysconfig.get_paths()["purelib"])
    main_scripts = Path(sysconfig.get_paths()["scripts"])
    distributions = _installed(PATCHED_PACKAGES)
    return [_build_one(session / f"worker-{index}", main_site, main_scripts, distributions) for index in range(count)]


def remove_session(parent: Path) -> None:
    shutil.rmtree(parent / f"session-{os.getpid()}", ignore_errors=True)


def _remove_finished_sessions(parent: Path) -> None:
    for folder in parent.glob("*") if parent.is_dir() else []:
        pid = folder.name.removeprefix("session-")
        if pid.isdigit() and process_alive(int(pid)) and int(pid) != os.getpid():
            continue
        shutil.rmtree(folder, ignore_errors=True)

    return True


def _installed(packages: tuple[str, ...]) -> list[tuple[Path, Path]]:
    """(package folder, dist-info folder) of each of ``packages`` installed in this environment."""
    found = []
    owners = importlib.metadata.packages_distributions()
    for package in packages:
        for name in owners.get(package, []):
            distribution = importlib.metadata.distribution(name)
            info = Path(str(distribution._path))  # type: ignore[attr-defined]  # PathDistribution's folder
            folder = info.parent / package
            if folder.is_dir() and info.is_dir():
                found.append((folder, info))
                break
    return found


def _build_one(root: Path, main_site: Path, main_scripts: Path, distributions: list[tuple[Path, Path]]) -> Path:
    if root.exists():
        shutil.rmtree(root)
    venv.EnvBuilder(symlinks=True, with_pip=False, clear=True).create(root)
    python = root / "bin" / "python"
    site = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    for folder, info in distributions:
        shutil.copytree(folder, site / folder.name, symlinks=True)
        shutil.copytree(info, site / info.name, symlinks=True)
    _write_overlay(site, main_site)
    _copy_scripts(main_scripts, root / "bin", python)
    (root / MARKER).write_text(f"made for one pytest session from {sys.prefix}\n", encoding="utf-8")
    return python


def _write_overlay(site: Path, main_site: Path) -> None:
    """The main environment's site-packages after the worker's own, its ``.pth`` files run."""
    pth = site / f"{OVERLAY}.pth"
    body = f"import site; site.addsitedir({str(main_site)!r})\n".encode()
    pth.write_bytes(body)
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    info = site / f"{OVERLAY}-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {OVERLAY}\nVersion: 0\n", encoding="utf-8")
    (info / "INSTALLER").write_text("apex-tests\n", encoding="utf-8")
    (info / "RECORD").write_text(f"{pth.name},sha256={digest},{len(body)}\n{info.name}/METADATA,,\n"
                                 f"{info.name}/INSTALLER,,\n{info.name}/RECORD,,\n", encoding="utf-8")


def _copy_scripts(main_scripts: Path, scripts: Path, python: Path) -> None:
    """The main environment's console scripts (apex, ray, ...) with the worker's interpreter."""
    for script in sorted(main_scripts.iterdir()):
        target = scripts / script.name
        if target.exists() or target.is_symlink() or not script.is_file():
            continue
        with open(script, "rb") as handle:
            first = handle.readline()
        if not first.startswith(b"#!") or b"python" not in first:
            continue
        text = script.read_bytes()
        target.write_bytes(b"#!" + str(python).encode() + b"\n" + text[len(first):])
        os.chmod(target, 0o755)
