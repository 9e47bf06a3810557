"""Content-addressed caches: finished grades, and baseline timings as a drift monitor.

A grade is keyed by everything that decides it: the task's content hash, the solution's hash, the
environment fingerprint, the grader version and the options that change what is measured. RL
loops resubmit identical files often; those come back from here at once. Infrastructure errors
are never cached. Baseline medians are kept per task, environment and shape; a new measurement
far from the recorded one means the machine drifted (clocks, thermals, a noisy neighbour).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import ValidationError

from apex_core.grader.result import GradeResult, Outcome

CACHE_DIR_ENV = "APEX_CACHE_DIR"
DRIFT_TOLERANCE = 0.10


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "apex"


def grade_key(task_hash: str, solution_hash: str, environment_key: str, grader_version: str, options: dict) -> str:
    material = json.dumps([task_hash, solution_hash, environment_key, grader_version, options], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


class GradeCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.root / "grades" / key[:2] / f"{key}.json"

    def get(self, key: str) -> GradeResult | None:
        path = self._path(key)
        try:
            return GradeResult.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            return None

    def put(self, key: str, result: GradeResult) -> None:
        if result.outcome is Outcome.infra_error:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(result.model_dump_json(), encoding="utf-8")
        temporary.replace(path)

    # --- baseline timings ------------------------------------------------------------------------

    def _baseline_path(self, task_hash: str, environment_key: str) -> Path:
        return self.root / "baselines" / f"{task_hash[:16]}-{environment_key}.json"

    def check_baseline(self, task_hash: str, environment_key: str, shape_key: str, median_ns: float) -> str | None:
        """Record a baseline median; return a drift message when it is far from the recorded one."""
        path = self._baseline_path(task_hash, environment_key)
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = {}
        previous = recorded.get(shape_key)
        message = None
        if previous and abs(median_ns - previous) / previous > DRIFT_TOLERANCE:
            message = f"baseline_drift: {shape_key} baseline {median_ns / 1e3:.2f} us, recorded {previous / 1e3:.2f} us"
        else:
            recorded[shape_key] = median_ns if previous is None else 0.8 * previous + 0.2 * median_ns
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(recorded), encoding="utf-8")
        return message
