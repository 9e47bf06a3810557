"""A workload profiled: its request mix under the profiler, kept in a run folder with its spec.

The workflow over the engines (layer 4): ``profile_workload`` runs a workload (``workloads``) under
the profiler (``profiling``) and keeps its run folder (``apex profile``, and the identify stage's
first half). Identifying what each hot kernel of that folder is (``identify_run``, ``apex
identify``) is the identify stage's logic, in ``apex_core/pipeline/stages/identify.py``.
"""

from apex_core.analysis.profile_run import WORKLOAD_FILE, ProfileSummary, load_run_workload, profile_workload

__all__ = [
    "WORKLOAD_FILE",
    "ProfileSummary",
    "load_run_workload",
    "profile_workload",
]
