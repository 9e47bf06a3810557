"""Where a profile lives on disk: ``results/<run-id>/profile.json`` beside ``trace.json``.

``apex profile`` writes here and ``apex identify --results DIR`` reads it back later, possibly on
another machine, so the trace path is stored relative to the run folder when it lies inside it.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from pydantic import ValidationError

from apex_core.errors import ApexUserError
from apex_core.profiling.records import SCHEMA_VERSION, ProfileResult

PROFILE_FILE = "profile.json"
DEFAULT_RESULTS_ROOT = Path("results")


def new_run_dir(root: Path = DEFAULT_RESULTS_ROOT, run_id: str | None = None) -> Path:
    """A fresh ``root/<run-id>`` folder; the default id sorts by time (``20261201-171903-3fa2``)."""
    run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def save_profile(result: ProfileResult, run_dir: Path) -> Path:
    """Write ``run_dir/profile.json`` and return its path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    stored = result
    if result.trace_path:
        trace = Path(result.trace_path)
        if trace.is_absolute() and trace.parent.resolve() == run_dir.resolve():
            stored = result.model_copy(update={"trace_path": trace.name})
    path = run_dir / PROFILE_FILE
    path.write_text(stored.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def load_profile(path: Path) -> ProfileResult:
    """The profile in a run folder (or a ``profile.json`` given directly), with one-line errors."""
    file = path / PROFILE_FILE if path.is_dir() else path
    if not file.is_file():
        where = f"no {PROFILE_FILE} in {path}" if path.is_dir() else f"{path} does not exist"
        raise ApexUserError(f"{where}: run 'apex profile' first, or pass the folder it wrote")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApexUserError(f"{file} is not a profile: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise ApexUserError(f"{file} is not a profile of schema version {SCHEMA_VERSION} (found {version!r}); profile again")
    data.pop("overhead", None)  # computed, written for readers of the file
    try:
        result = ProfileResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ApexUserError(f"{file} is not a valid profile: {where}: {first['msg']}") from None
    if result.trace_path and not Path(result.trace_path).is_absolute():
        result = result.model_copy(update={"trace_path": str(file.parent / result.trace_path)})
    return result
