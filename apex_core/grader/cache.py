"""Content-addressed caches: finished grades, and baseline timings as a drift monitor.

A grade is keyed by everything that decides it: the task's content hash, the solution's hash, the
environment fingerprint, the grader version and the options that change what is measured. RL
loops resubmit identical files often; those come back from here at once. Infrastructure errors
are never cached. Baseline medians are kept per task, environment and shape; a new measurement
far from the recorded one means the machine drifted (clocks, thermals, a noisy neighbour).

Every entry is signed: an HMAC-SHA256, under a key kept in the cache directory (``KEY_FILE``,
created 0600 on first use), of the entry's key and its content. An entry without a valid signature
is not read (as if absent), so a grade cannot be forged by writing a file, and an entry cannot be
moved to another key. A key file that others may read or that is not the user's own is replaced,
which voids every entry signed with it. Confined solutions never see the cache directory at all
(``sandbox.py``); the signature is what holds for unconfined ones and for anything else that can
write there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from pydantic import ValidationError

from apex_core.grader.result import GradeResult, Outcome

CACHE_DIR_ENV = "APEX_CACHE_DIR"
DRIFT_TOLERANCE = 0.10
KEY_FILE = "signing-key"
KEY_BYTES = 32


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
        self._secret: bytes | None = None

    def _path(self, key: str) -> Path:
        return self.root / "grades" / key[:2] / f"{key}.json"

    # --- signatures ------------------------------------------------------------------------------

    def _key(self) -> bytes | None:
        """The signing key: read once, created on first use; None where neither is possible."""
        if self._secret is None:
            self._secret = _load_key(self.root / KEY_FILE)
        return self._secret

    def _sign(self, name: str, body: str) -> str | None:
        key = self._key()
        if key is None:
            return None
        return hmac.new(key, f"{name}\n{body}".encode(), hashlib.sha256).hexdigest()

    def _read_signed(self, path: Path, name: str) -> str | None:
        """The body of the signed entry at ``path`` (signed for ``name``), or None if it is absent,
        unsigned or signed by anyone else."""
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            body, mac = entry["body"], entry["mac"]
        except (OSError, ValueError, TypeError, KeyError):
            return None
        expected = self._sign(name, body) if isinstance(body, str) and isinstance(mac, str) else None
        if expected is None or not hmac.compare_digest(expected, mac):
            return None
        return body

    def _write_signed(self, path: Path, name: str, body: str) -> None:
        mac = self._sign(name, body)
        if mac is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        temporary.write_text(json.dumps({"mac": mac, "body": body}), encoding="utf-8")
        temporary.replace(path)

    # --- grades ----------------------------------------------------------------------------------

    def get(self, key: str) -> GradeResult | None:
        body = self._read_signed(self._path(key), f"grade:{key}")
        if body is None:
            return None
        try:
            return GradeResult.model_validate_json(body)
        except (ValidationError, ValueError):
            return None

    def put(self, key: str, result: GradeResult) -> None:
        if result.outcome is Outcome.infra_error:
            return
        self._write_signed(self._path(key), f"grade:{key}", result.model_dump_json())

    # --- baseline timings ------------------------------------------------------------------------

    def _baseline_path(self, task_hash: str, environment_key: str) -> Path:
        return self.root / "baselines" / f"{task_hash[:16]}-{environment_key}.json"

    def check_baseline(self, task_hash: str, environment_key: str, shape_key: str, median_ns: float) -> str | None:
        """Record a baseline median; return a drift message when it is far from the recorded one."""
        path = self._baseline_path(task_hash, environment_key)
        body = self._read_signed(path, f"baseline:{path.name}")
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
            self._write_signed(path, f"baseline:{path.name}", json.dumps(recorded, sort_keys=True))
        return message


def _load_key(path: Path) -> bytes | None:
    """The key at ``path`` if only this user can read and write it, else a new one put there (0600).

    Two processes creating it at once agree: the first link wins and the other reads it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(KEY_BYTES + 1)
        if info.st_uid == os.geteuid() and not info.st_mode & 0o077 and len(key) == KEY_BYTES:
            return key
        replace = True  # others could read it, or wrote it: a new key voids what they could sign
    except FileNotFoundError:
        replace = False
    except OSError:
        replace = True
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        key = secrets.token_bytes(KEY_BYTES)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        try:
            if replace:
                os.replace(temporary, path)
                return key
            try:
                os.link(temporary, path)
                return key
            except FileExistsError:
                return _load_key(path) if path.is_file() and not path.is_symlink() else None
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return None
