"""Finding a usable Magpie checkout (MAGPIE_ROOT) and which tasks it can time."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from apex_core.grader.magpie.errors import MagpieNotInstalledError
from apex_core.tasks.schema import Task

MAGPIE_ROOT_ENV = "MAGPIE_ROOT"
MAGPIE_REQUIRED_FILES = ("Magpie/__init__.py", "Magpie/__main__.py", "Magpie/bench/_runner.py")


def magpie_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why MAGPIE_ROOT names no usable Magpie (one line), or None when it does."""
    env = os.environ if environ is None else environ
    raw = env.get(MAGPIE_ROOT_ENV, "").strip()
    if not raw:
        return (
            f"--backend magpie needs {MAGPIE_ROOT_ENV} set to a Magpie checkout (the directory that "
            "holds the 'Magpie' package, e.g. a clone of AMD-AGI/Magpie); it is not set"
        )
    root = Path(raw).expanduser()
    if not root.is_dir():
        return f"{MAGPIE_ROOT_ENV}={raw} is not a directory; point it at a Magpie checkout"
    if "$" in str(root.resolve()):
        return f"{MAGPIE_ROOT_ENV}={raw} contains '$', which Magpie would expand in its config; use a path without it"
    missing = [name for name in MAGPIE_REQUIRED_FILES if not (root / name).is_file()]
    if "Magpie/__init__.py" in missing:
        return f"{MAGPIE_ROOT_ENV}={raw} holds no 'Magpie' package (no Magpie/__init__.py); point it at the checkout's top directory"
    if "Magpie/__main__.py" in missing:
        return f"{MAGPIE_ROOT_ENV}={raw}: the Magpie package has no __main__.py, so 'python -m Magpie' cannot run"
    if missing:
        return (
            f"{MAGPIE_ROOT_ENV}={raw}: this Magpie has no Latency stage (no Magpie/bench/_runner.py); "
            "Apex needs a Magpie with bench_target latency support"
        )
    return None


def magpie_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Magpie checkout MAGPIE_ROOT names, if it holds the Magpie package; else None."""
    if magpie_problem(environ) is not None:
        return None
    env = os.environ if environ is None else environ
    return Path(env[MAGPIE_ROOT_ENV].strip()).expanduser().resolve()


def require_magpie_root(environ: Mapping[str, str] | None = None) -> Path:
    """``magpie_root()``, or a one-line MagpieNotInstalledError saying what is missing."""
    problem = magpie_problem(environ)
    if problem is not None:
        raise MagpieNotInstalledError(problem)
    root = magpie_root(environ)
    assert root is not None
    return root


def magpie_supports(task: Task) -> str | None:
    """Why Magpie cannot time this task (one line), or None when it can.

    Magpie's latency harness times CUDA/HIP devices only (``do_bench_cudagraph`` or rocprofv3),
    so CPU tasks are graded by the judge's own timing.
    """
    if not task.needs_gpu:
        return f"Magpie times GPU kernels only; {task.id} is a CPU task, grade it with the default backend"
    return None
