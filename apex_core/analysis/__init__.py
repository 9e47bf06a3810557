"""A workload's kernels, found: profile a workload, then identify what its device time goes to.

The workflow over the engines (layer 4): ``profile_workload`` runs a workload (``workloads``) under
the profiler (``profiling``) and keeps its run folder; ``identify_run`` reads that folder, asks the
identifier (``identify``) what each hot kernel is, runs the model once more to record the shapes
it passes at the patchable call sites, and writes ``identify.json`` next to the profile.
"""

from apex_core.analysis.identify_run import IDENTIFY_FILE, SHAPES_FILE, IdentifyReport, identify_run, latest_run
from apex_core.analysis.profile_run import WORKLOAD_FILE, ProfileSummary, load_run_workload, profile_workload

__all__ = [
    "IDENTIFY_FILE",
    "SHAPES_FILE",
    "WORKLOAD_FILE",
    "IdentifyReport",
    "ProfileSummary",
    "identify_run",
    "latest_run",
    "load_run_workload",
    "profile_workload",
]
