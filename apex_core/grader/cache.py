"""Content-addressed caches: finished grades, and baseline timings as a drift monitor.

A grade is keyed by everything that decides it: the task's content hash, the solution's hash, the
environment fingerprint, the grader version and the options that change what is measured. RL
loops resubmit identical files often; those come back from here at once. Infrastructure errors
are never cached. Baseline medians are kept per task, environment and shape; a new measurement
far from the recorded one means the machine drifted (clocks, thermals, a noisy neighbour).

Every entry is signed (``signing.Signer``, the installation's one key, kept in the cache
directory): an HMAC-SHA256 of the entry's key and its content. An entry without a valid signature
is not read (as if absent), so a grade cannot be forged by writing a file, and an entry cannot be
moved to another key. Confined solutions never see the cache directory at all (``sandbox.py``);
the signature is what holds for anything else that can write there. The judge's ledger of
gradings (``ledger.py``) is signed with the same key, in the same directory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from apex_core.grader.result import GradeResult, Outcome
from apex_core.grader.signing import KEY_FILE, Signer
from apex_core.storage import CACHE_DIR_ENV, cache_root

__all__ = ["CACHE_DIR_ENV", "KEY_FILE", "GradeCache", "default_cache_dir", "grade_key"]

DRIFT_TOLERANCE = 0.10


def default_cache_dir() -> Path:
    """The cache folder (``apex_core.storage.cache_root``: one rule for every cache of Apex)."""
    return cache_root()


def grade_key(task_hash: str, solution_hash: str, environment_key: str, grader_version: str, options: dict) -> str:
    material = json.dumps([task_hash, solution_hash, environment_key, grader_version, options], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


class GradeCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_dir()
        self.signer = Signer(self.root)

    def _path(self, key: str) -> Path:
        return self.root / "grades" / key[:2] / f"{key}.json"

    # --- grades ----------------------------------------------------------------------------------

    def get(self, key: str) -> GradeResult | None:
        body = self.signer.read(self._path(key), f"grade:{key}")
        if body is None:
            return None
        try:
            return GradeResult.model_validate_json(body)
        except (ValidationError, ValueError):
            return None

    def put(self, key: str, result: GradeResult) -> None:
        if result.outcome is Outcome.infra_error:
            return
        self.signer.write(self._path(key), f"grade:{key}", result.model_dump_json())

    # --- baseline timings ------------------------------------------------------------------------

    def _baseline_path(self, task_hash: str, environment_key: str) -> Path:
        return self.root / "baselines" / f"{task_hash[:16]}-{environment_key}.json"

    def check_baseline(self, task_hash: str, environment_key: str, shape_key: str, median_ns: float) -> str | None:
        """Record a baseline median; return a drift message when it is far from the recorded one."""
        path = self._baseline_path(task_hash, environment_key)
        body = self.signer.read(path, f"baseline:{path.name}")
        try:
            recorded = json.loads(body) if body is not None else {}
        except ValueError:
            recorded = {}
        if not isinstance(recorded, dict):
            recorded = {}
        previous = recorded.get(shape_key)
        message = None
        if previous and abs(median_ns - previous) / previous > DRIFT_TOLERANCE:
            message = f"baseline_drift: {shape_key} baseline {median_ns / 1e3:.2f} us, recorded {previous / 1e3:.2f} us"
        else:
            recorded[shape_key] = median_ns if previous is None else 0.8 * previous + 0.2 * median_ns
            self.signer.write(path, f"baseline:{path.name}", json.dumps(recorded, sort_keys=True))
        return message

