"""Kernel defaults: what every task of one kernel shares, stated once in its kernel family.

A kernel family is a directory under ``apex_core/kernels`` (its baselines, references, input
generators and roofline). For each kernel it provides, it has a defaults file
``<family>/<kernel>.defaults.toml`` that holds any task key except the task's identity and prose
(``id``, ``model``, ``kernel``, ``family``, ``description``, ``contract``). A task definition names
its model and kernel and states only what differs from those defaults; its keys replace the
defaults' keys whole (a task that states ``[params]`` states all of its params), so what a task
gets is always either its own line or the defaults file's, never a mix to puzzle out. A task that
must not take one of the defaults' keys at all (a zero-centered norm that no library function
stands for, so no ``[library]``) names it in ``drop_defaults`` and gets the schema's default.

Code is addressed one way in both files: a path relative to the family directory, ``file`` for a
source file (``baseline``) and ``file.py:function`` for a function (``reference``, ``inputs``,
``roofline``). The loaded task carries the same addresses prefixed with the family.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from apex_core.errors import TaskDefinitionError, UnknownNameError
from apex_core.tasks.schema import FUNCTION_ADDRESS, KERNELS_DIR, SOURCE_ADDRESS, Task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULTS_SUFFIX = ".defaults.toml"
DROP_KEY = "drop_defaults"
TASK_ONLY_KEYS = ("id", "model", "kernel", "family", "description", "contract")
"""Keys a defaults file may not hold: the task's identity, and the prose that names the model's
numbers (a default there would put one model's sizes into another model's prompt)."""
SOURCE_KEYS = ("baseline",)
FUNCTION_KEYS = ("reference", "inputs", "roofline")


class KernelDefaults(BaseModel):
    """One kernel's defaults file, read and checked."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    family: str
    path: Path
    values: dict[str, Any]

    @property
    def family_dir(self) -> Path:
        return KERNELS_DIR / self.family


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A task definition's or a defaults file's table; an unreadable or malformed file is a
    one-line TaskDefinitionError naming ``what`` it is."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskDefinitionError(f"cannot read {what} {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskDefinitionError(f"{what} {path} is not valid TOML: {exc}") from None


def _read_defaults(path: Path) -> KernelDefaults:
    family, kernel = path.parent.name, path.name[: -len(DEFAULTS_SUFFIX)]
    values = read_toml(path, "kernel defaults")
    allowed = set(Task.model_fields) - set(TASK_ONLY_KEYS)
    for key in values:
        if key in TASK_ONLY_KEYS:
            raise TaskDefinitionError(f"kernel defaults {path}: {key!r} belongs in each task's definition, not in the defaults")
        if key not in allowed:
            raise TaskDefinitionError(f"kernel defaults {path}: {key!r} is not a task key (known: {', '.join(sorted(allowed))})")
    check_addresses(values, family, str(path))
    return KernelDefaults(kernel=kernel, family=family, path=path, values=values)


@lru_cache(maxsize=1)
def _all_defaults() -> dict[str, KernelDefaults]:
    found: dict[str, KernelDefaults] = {}
    for path in sorted(KERNELS_DIR.glob(f"*/*{DEFAULTS_SUFFIX}")):
        defaults = _read_defaults(path)
        if defaults.kernel in found:
            other = found[defaults.kernel].path
            raise TaskDefinitionError(f"kernel {defaults.kernel!r} has two defaults files: {other} and {path}")
        found[defaults.kernel] = defaults
    return found


def kernel_defaults() -> dict[str, KernelDefaults]:
    """Every kernel that has a defaults file, by kernel name."""
    return dict(_all_defaults())


def get_kernel_defaults(kernel: str) -> KernelDefaults:
    """The defaults of one kernel; an unknown kernel is an UnknownNameError listing the known ones."""
    found = _all_defaults()
    if kernel not in found:
        raise UnknownNameError("kernel", kernel, found)
    return found[kernel]


def check_addresses(values: dict[str, Any], family: str, where: str) -> None:
    """Each code address in ``values`` is family-relative and names a file of the family."""
    for key in (*SOURCE_KEYS, *FUNCTION_KEYS):
        if key not in values:
            continue
        value = values[key]
        pattern, form = (SOURCE_ADDRESS, "<file>") if key in SOURCE_KEYS else (FUNCTION_ADDRESS, "<file>.py:<function>")
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise TaskDefinitionError(
                f"{where}: {key} = {value!r} must be '{form}', a path relative to apex_core/kernels/{family}/"
            )
        file = value.partition(":")[0]
        if ".." in Path(file).parts:
            raise TaskDefinitionError(f"{where}: {key} = {value!r} leaves apex_core/kernels/{family}/; a task's code is its family's")
        if not (KERNELS_DIR / family / file).is_file():
            raise TaskDefinitionError(f"{where}: {key} = {value!r}: no file {file!r} in apex_core/kernels/{family}/ (not found)")


def apply_defaults(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """A task definition's keys over its kernel's defaults, with code addresses made
    kernels-relative (``<family>/...``) and ``family`` set: the dict ``Task`` validates."""
    kernel = raw.get("kernel")
    if not isinstance(kernel, str):
        raise TaskDefinitionError(f"{where}: 'kernel' must name a kernel that has a defaults file in apex_core/kernels/<family>/")
    if "family" in raw:
        raise TaskDefinitionError(f"{where}: 'family' is not stated in a task; it is the directory of the kernel's defaults file")
    try:
        defaults = get_kernel_defaults(kernel)
    except UnknownNameError as exc:
        raise TaskDefinitionError(f"{where}: {exc}") from None
    raw = dict(raw)
    dropped = raw.pop(DROP_KEY, [])
    if not isinstance(dropped, list) or not all(isinstance(k, str) for k in dropped):
        raise TaskDefinitionError(f"{where}: {DROP_KEY} must be a list of key names, e.g. {DROP_KEY} = [\"library\"]")
    for key in dropped:
        if key not in defaults.values:
            raise TaskDefinitionError(f"{where}: {DROP_KEY} names {key!r}, which {defaults.path.name} does not set")
        if key in raw:
            raise TaskDefinitionError(f"{where}: {DROP_KEY} names {key!r}, which the task also states; keep one")
    check_addresses(raw, defaults.family, where)
    inherited = {k: v for k, v in defaults.values.items() if k not in dropped}
    merged = {**inherited, **raw, "family": defaults.family}
    for key in (*SOURCE_KEYS, *FUNCTION_KEYS):
        if key in merged:
            merged[key] = f"{defaults.family}/{merged[key]}"
    return merged
