"""The folders a tool's caller may name: only inside the results root, ``results/`` in the server's
working folder, where the servers keep runs, profiles and exports.

Why: a tool argument is whatever the model (or anyone reaching an HTTP server) sends.
``export_rl_dataset(output_dir=...)`` wrote wherever it was told, and ``resume_run`` went on with
any folder holding a state.json (issue 28). A path is taken as the servers take every path,
relative to the server's working folder, then resolved with its links followed, and refused with
one line saying what is allowed unless it lies inside the root (or, where a tool reads what
another tool wrote elsewhere, inside that folder too). The root itself is the user's choice and
may be a link; what is under it may not lead out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.pipeline.state import RUNS_DIR

RESULTS_ROOT = Path("results")
"""Relative, so it follows the server's working folder (the repository root, as hosts start it)."""


def _resolved(value: str) -> Path:
    if "\0" in value:
        raise ApexUserError(f"{value!r} holds a NUL character; give a path")
    return (Path.cwd() / value).resolve()


def inside_results(value: str, parameter: str, example: str, also: Sequence[Path] = ()) -> Path:
    """``value`` resolved, if it lies inside the results root (or one of the folders ``also``);
    otherwise ApexUserError naming ``parameter``, where it leads and what would be accepted."""
    resolved = _resolved(value)
    roots = [RESULTS_ROOT.resolve(), *(Path(folder).resolve() for folder in also)]
    if any(resolved.is_relative_to(root) for root in roots):
        return resolved
    leads = "" if Path(value).is_absolute() and str(resolved) == value else f" (it leads to {resolved})"
    allowed = " or ".join(str(root) for root in roots)
    raise ApexUserError(f"{parameter} {value!r} is outside {allowed}{leads}: this server reads and writes only there; "
                        f"give a path inside it, e.g. {example}")


def run_folder(value: str, parameter: str) -> Path:
    """A pipeline run named by its id (list_runs) or by its folder, results/runs/<run-id>, resolved;
    anything else is ApexUserError."""
    runs = (RESULTS_ROOT / RUNS_DIR).resolve()
    text = value.strip()
    plain = bool(text) and text not in (".", "..") and "/" not in text and "\\" not in text
    resolved = _resolved(str(runs / text) if plain else text)
    if resolved.parent != runs:
        raise ApexUserError(f"{parameter} {value!r} is not a run of this server's results: give a run id from list_runs "
                            f"or its folder, {runs}/<run-id> (it leads to {resolved})")
    return resolved
