"""``apex doctor``: what this installation can and cannot do, each finding with its fix, and the
versions a bug report needs.

Every check is a real probe on this machine (an import, a confined start of a worker, a file
written and removed, the patch journal read), never a guess from configuration; a check that
cannot run says why. Failures are what stops Apex's main path (grading, a run); warnings are what
limits it (no GPU, an agent CLI missing, the environment still patched).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

Status = Literal["ok", "warn", "fail"]

AGENT_CLIS = {"claude": ("claude", ("ANTHROPIC_API_KEY",), ".claude"),
              "codex": ("codex", ("OPENAI_API_KEY", "CODEX_API_KEY"), ".codex"),
              "cursor": ("cursor-agent", ("CURSOR_API_KEY",), ".cursor")}
"""Backend -> (its CLI, the environment variables that log it in, the folder its own login writes)."""

VERSIONS = ("torch", "triton", "transformers", "liger-kernel", "flash-linear-attention", "mcp", "fastmcp", "pydantic",
            "ray", "chromadb", "trl", "verifiers", "openenv-core")


class Check(BaseModel):
    name: str
    status: Status
    detail: str
    fix: str = ""


class Diagnosis(BaseModel):
    checks: list[Check]
    versions: dict[str, str]
    """Distribution -> installed version ('-' when not installed): paste into a bug report."""

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)


def diagnose(results_dir: Path = Path("results")) -> Diagnosis:
    checks: list[Check] = []
    for probe in (_python, _torch, _triton, _confinement, *_agent_probes(), _docs_index, _patches,
                  lambda: _writable("results folder", results_dir), _cache_writable, _patch_state_writable):
        try:
            checks.append(probe())
        except Exception as error:  # a probe that breaks is a finding, not a crash of the doctor
            name = getattr(probe, "__name__", "check").strip("_<>") or "check"
            checks.append(Check(name=name, status="fail", detail=f"the check itself failed: {type(error).__name__}: {error}"))
    return Diagnosis(checks=checks, versions={name: _version(name) for name in VERSIONS})


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _python() -> Check:
    from apex_core import __version__

    return Check(name="apex", status="ok", detail=f"apex {__version__}, python {platform.python_version()} "
                                                  f"({sys.executable}), {platform.platform()}")


def _torch() -> Check:
    try:
        import torch
    except ImportError as error:
        return Check(name="torch", status="fail", detail=f"torch does not import: {error}",
                     fix="bash setup.sh (it installs the pinned torch)")
    build = f"ROCm {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    if torch.cuda.is_available():
        names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
        return Check(name="torch", status="ok", detail=f"torch {torch.__version__} ({build}); "
                                                       f"{torch.cuda.device_count()} GPU(s): {', '.join(names)}")
    return Check(name="torch", status="warn", detail=f"torch {torch.__version__} ({build}); no GPU visible",
                 fix="on a GPU machine, a torch built for its ROCm or CUDA; here Triton tasks grade under the "
                     "interpreter (correctness only) and timings say nothing about GPUs")


def _triton() -> Check:
    try:
        import triton
    except ImportError as error:
        return Check(name="triton", status="fail", detail=f"triton does not import: {error}",
                     fix="bash setup.sh (Triton tasks cannot be graded without it)")
    return Check(name="triton", status="ok", detail=f"triton {triton.__version__}")


def _confinement() -> Check:
    from apex_core.grader import confinement_problem

    problem = confinement_problem()
    if problem is None:
        return Check(name="confinement", status="ok", detail="agent solutions run confined (a worker started in its sandbox)")
    return Check(name="confinement", status="fail", detail=f"agent code cannot be confined here: {problem}",
                 fix="allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or the "
                     "container's seccomp/AppArmor profile), or pass --unconfined where you accept running agent code "
                     "with your rights")


def _agent_probes() -> list[Callable[[], Check]]:
    return [lambda name=name: _agent(name) for name in AGENT_CLIS]


def _agent(backend: str) -> Check:
    cli, keys, login_folder = AGENT_CLIS[backend]
    found = shutil.which(cli)
    name = f"agent {backend}"
    if not found:
        return Check(name=name, status="warn", detail=f"{cli} is not on PATH: --agent {backend} cannot run",
                     fix=f"install it if you use --agent {backend} (README, \"Agent hosts\"); --agent replay needs nothing")
    logged_in = [key for key in keys if os.environ.get(key)]
    folder = Path.home() / login_folder
    if logged_in:
        how = f"{logged_in[0]} is set"
    elif folder.is_dir() and any(folder.iterdir()):
        how = f"{folder} exists (its own login; not verified)"
    else:
        return Check(name=name, status="warn", detail=f"{found}; no credentials found ({' or '.join(keys)} unset, no {folder})",
                     fix=f"log in with {cli} once, or set {keys[0]}")
    return Check(name=name, status="ok", detail=f"{found}; {how}")


def _docs_index() -> Check:
    from apex_core.docsearch.store import index_exists, read_manifest, resolve_index_dir

    folder = resolve_index_dir()
    if not index_exists(folder):
        return Check(name="docs index", status="warn", detail=f"no search index in {folder}: search_docs has nothing to search",
                     fix="apex docs index")
    manifest = read_manifest(folder)
    units = len(manifest.units) if manifest is not None else 0
    if not units:
        return Check(name="docs index", status="warn", detail=f"{folder} holds an index with no manifest or no files",
                     fix="apex docs index")
    return Check(name="docs index", status="ok", detail=f"{folder}: {units} file(s) indexed")


def _patches() -> Check:
    from apex_core.patcher import environment_status

    shown = environment_status()
    if shown.patched:
        return Check(name="patches", status="warn", detail="this environment is patched (apex patch status lists what)",
                     fix="apex patch restore, unless a run or a benchmark of yours is using the patches")
    findings = ([shown.problem] if shown.problem else []) + shown.unaccounted
    if findings:
        return Check(name="patches", status="warn", detail=f"{len(findings)} finding(s), first: {findings[0]}",
                     fix="apex patch status; reinstall what it names (pip install --force-reinstall --no-deps NAME)")
    return Check(name="patches", status="ok", detail="nothing patched; the patch points' files are as their packages installed them")


def _writable(what: str, folder: Path) -> Check:
    name = f"writable {what}"
    target = folder if folder.exists() else next((p for p in folder.absolute().parents if p.exists()), Path("/"))
    try:
        with tempfile.NamedTemporaryFile(dir=target, prefix=".apex-doctor-"):
            pass
    except OSError as error:
        return Check(name=name, status="fail", detail=f"{folder}: cannot write in {target} ({error.strerror})",
                     fix=f"choose a folder you can write (--results-dir, APEX_CACHE_DIR) or fix the rights of {target}")
    return Check(name=name, status="ok", detail=str(folder.absolute()) + ("" if folder.exists() else " (made when first used)"))


def _cache_writable() -> Check:
    from apex_core.grader import default_cache_dir

    return _writable("cache", default_cache_dir())


def _patch_state_writable() -> Check:
    from apex_core.patcher.journal import state_dir

    return _writable("patch state", state_dir())
