"""Grading: run a candidate out of process, check it against the reference, time it, score it.

``judge`` orchestrates one grading, stage by stage (``slots``, ``calibration``, ``correctness``,
``timing``, ``timed_checks``, ``verdict``), all working on one ``grading.Grading``; ``compare``,
``stats``, ``trace_checks``, ``prescan`` and ``integrity`` decide; ``state`` holds what the
gradings of one process share; ``service`` is what the CLI, the MCP server and the executors call;
``cache``, ``ledger`` and ``signing`` keep verdicts. ``isolation`` is how a candidate runs at all:
in a confined child process that the judge reaches only over a checked channel. ``magpie`` is
the Magpie backend, with a front door of its own.

This module is the grader's front door: code outside the package imports from here (or from
``apex_core.grader.magpie``), never from a submodule, so that the modules behind it can move and
split without touching their users (``tests/test_layers.py`` keeps it that way).

The exports are lazy (PEP 562): a name is looked up in its module when it is asked for. Reading a
``GradeResult`` must not import the judge, NumPy or torch, and the worker and reaper children
start by importing this package before anything of theirs runs; an eager door would make every
one of them pay for the whole grader.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, str] = {
    # What a grading is asked and what it answers.
    "GradeOptions": "options",
    "GradeResult": "result",
    "NOT_TIMED": "result",
    "Outcome": "result",
    "ShapeCheck": "result",
    # Grading one solution, and the verdicts made without one.
    "grade": "judge",
    "provenance": "verdict",
    "result_without_solution": "verdict",
    # Grading several, through the cache: what the CLI, the MCP server and the executors call.
    "MAX_STEP_TIMEOUT_S": "service",
    "Ranked": "service",
    "cache_key": "service",
    "environment_key_for": "service",
    "grade_cached": "service",
    "grade_solutions": "service",
    "rank": "service",
    # Kept verdicts: the grade cache and the signed ledger of every grading handed out.
    "GradeCache": "cache",
    "default_cache_dir": "cache",
    "GradingLedger": "ledger",
    # Solution files.
    "allowed_suffixes": "solution_file",
    "check_solution_file": "solution_file",
    "solution_paths": "solution_file",
    "file_hash": "solution_file",
    # Devices, and the environment a grading is measured in.
    "device_from_option": "devices",
    "gpu_count": "devices",
    "grading_device": "devices",
    "require_device": "devices",
    "detected_device": "fingerprint",
    "environment": "fingerprint",
    # Checking a call outside a grading (the suite's interpreter check, the patcher's in-model check).
    "argument_copy": "call_check",
    "check_call": "call_check",
    "on_cpu": "call_check",
    "as_output_list": "compare",
    "compare_all": "compare",
    # Statistics (the patcher's credit; the benchmarks).
    "log_t_interval": "stats",
    "median": "stats",
    "median_interval": "stats",
    "pairs_for_confidence": "stats",
    # Running other code confined as a candidate is: the patcher's children, agent sessions.
    "ChildFailed": "isolation.confined",
    "ConfinedChild": "isolation.confined",
    "ParentChannel": "isolation.confined",
    "require_confinement": "isolation.confined",
    "confinement_problem": "isolation.process",
    "become_subreaper": "isolation.reaper",
    # Building HIP/CUDA/C++ sources as the worker does (the patcher's native library).
    "COMPILED_SUFFIXES": "isolation.native",
    "CompileError": "isolation.native",
    "ToolchainMissing": "isolation.native",
    "build_extension": "isolation.native",
    "extension_name": "isolation.native",
    # The machinery itself, for the benchmarks that measure it.
    "Grading": "grading",
    "launch_cover_ns": "timing",
    "PACKAGE_PARENT": "isolation.process",
    "Worker": "isolation.worker",
    "WorkerProcess": "isolation.process",
    "WorkerSpec": "isolation.process",
    "worker_environment": "isolation.process",
}
"""Exported name -> the submodule (relative to this package) that defines it."""

_NAMESPACES: dict[str, str] = {
    "sandbox": "isolation.sandbox",
}
"""Exported as a whole module: the sandbox is a toolkit of low-level calls (``spawn``, ``View``,
``worker_view``, ``SandboxError``) that read right only with their prefix; agent sessions are
confined with it."""

__all__ = sorted([*_EXPORTS, *_NAMESPACES])


def __getattr__(name: str) -> Any:
    # Not cached in globals(): a name is looked up in its module every time, so a test that
    # replaces it there (monkeypatch) is seen by code that imports it from here later.
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in _NAMESPACES:
        return import_module(f"{__name__}.{_NAMESPACES[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
