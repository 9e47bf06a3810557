"""The Magpie backend: Magpie compiles and times baseline and solution; correctness stays ours.

The package: ``install`` (finding Magpie), ``workspace`` (its kernel config and bench targets),
``run`` (the sandboxed run and its report file), ``report`` (reading the report as hostile data),
``timing`` (per-shape timings), ``grading`` (Magpie's timing inside an Apex grading), ``errors``.

The judge calls ``run_magpie_timing(task, baseline_path, solution_path, shapes, timeout_s,
scratch)``, which returns per-shape medians with Magpie's raw samples or raises ``MagpieError``
(a one-line reason, a ``kind``, the ``role`` to blame). How Magpie is driven, why its report is
read as hostile data, and which of Magpie's sources this was written against (nothing has run
against a real Magpie): docs/magpie.md.
"""

from apex_core.grader.magpie.errors import MagpieError, MagpieNotInstalledError
from apex_core.grader.magpie.install import MAGPIE_ROOT_ENV, magpie_problem, magpie_root, magpie_supports, require_magpie_root
from apex_core.grader.magpie.report import MagpieKernelResult, MagpieReport, parse_compare_report
from apex_core.grader.magpie.run import find_report, read_report, run_magpie
from apex_core.grader.magpie.timing import MagpieShapeTiming, MagpieTiming, run_magpie_timing, timing_from_report
from apex_core.grader.magpie.workspace import MagpieEntry, MagpieLatency, MagpieWorkspace, plan_entries, write_magpie_workspace

__all__ = [
    "MAGPIE_ROOT_ENV",
    "MagpieEntry",
    "MagpieError",
    "MagpieKernelResult",
    "MagpieLatency",
    "MagpieNotInstalledError",
    "MagpieReport",
    "MagpieShapeTiming",
    "MagpieTiming",
    "MagpieWorkspace",
    "find_report",
    "magpie_problem",
    "magpie_root",
    "magpie_supports",
    "parse_compare_report",
    "plan_entries",
    "read_report",
    "require_magpie_root",
    "run_magpie",
    "run_magpie_timing",
    "timing_from_report",
    "write_magpie_workspace",
]
