"""Finding tasks: the shipped definitions plus any directories named in ``APEX_TASK_DIRS``.

A definition is read over its kernel's defaults (``families``), its "@field" values resolved from
the model registry, and the result checked as a whole, so one malformed file is reported with its
path and what is wrong instead of surfacing later as an odd grading failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from apex_core.errors import TaskDefinitionError, UnknownNameError
from apex_core.models import ModelConfig, get_model
from apex_core.tasks.families import apply_defaults, read_toml
from apex_core.tasks.schema import NAME_AND_PROSE, Task, check_reference

DEFINITIONS_DIR = Path(__file__).resolve().parent / "definitions"
TASK_DIRS_ENV = "APEX_TASK_DIRS"


def definition_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(TASK_DIRS_ENV, "").split(os.pathsep) if p]
    return [DEFINITIONS_DIR, *extra]


def _resolve_model_refs(value: Any, model: ModelConfig, path: Path, where: str = "") -> Any:
    """Replace "@field" strings by the model's value of that field."""
    if isinstance(value, str) and value.startswith("@"):
        field = value[1:]
        if field in ModelConfig.model_fields:
            return getattr(model, field)
        if field in model.extra:
            return model.extra[field]
        raise TaskDefinitionError(f"task definition {path}: {where}: {value!r} names no field of model {model.slug!r}")
    if isinstance(value, dict):
        return {k: _resolve_model_refs(v, model, path, f"{where}.{k}".lstrip(".")) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_model_refs(v, model, path, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "(file)"
    return f"{location}: {first['msg']}"


def load_task_file(path: Path) -> Task:
    """Parse and check one definition; every problem is a one-line TaskDefinitionError."""
    raw = read_toml(path, "task definition")
    model_name = raw.get("model")
    if not isinstance(model_name, str):
        raise TaskDefinitionError(f"task definition {path}: 'model' must name a model of the registry")
    try:
        model = get_model(model_name)
    except UnknownNameError as exc:
        raise TaskDefinitionError(f"task definition {path}: {exc}") from None
    merged = apply_defaults(raw, f"task definition {path}")
    task = _resolved_for(merged, model, path)
    if path.stem != task.id:
        raise TaskDefinitionError(f"task definition {path}: file name must be '{task.id}.toml'")
    _check_also_models(task, merged, path)
    for ref in (task.reference, task.inputs, task.roofline):
        try:
            check_reference(ref)
        except ValueError as exc:
            raise TaskDefinitionError(f"task definition {path}: cannot load {ref!r} ({exc})") from None
    return task


def _resolved_for(merged: dict[str, Any], model: ModelConfig, path: Path) -> Task:
    """The definition (over its defaults) with its "@field" values taken from ``model``."""
    merged = {**merged, "model": model.slug}
    merged.setdefault("id", f"{model.slug}__{merged['kernel']}")
    try:
        return Task.model_validate(_resolve_model_refs(merged, model, path))
    except ValidationError as exc:
        raise TaskDefinitionError(f"task definition {path}: {_first_error(exc)}") from None


def _check_also_models(task: Task, merged: dict[str, Any], path: Path) -> None:
    """Each of ``also_models`` must run exactly this task: the definition resolved for that model
    behaves the same (``Task.behaviour_hash``), else it needs a task of its own."""
    for name in task.also_models:
        try:
            other = get_model(name)
        except UnknownNameError as exc:
            raise TaskDefinitionError(f"task definition {path}: also_models: {exc}") from None
        if other.slug != name or name == task.model:
            raise TaskDefinitionError(f"task definition {path}: also_models: name each other model once by its slug "
                                      f"({other.slug!r}), not the task's own model")
        as_other = _resolved_for({k: v for k, v in merged.items() if k != "id"}, other, path)
        if as_other.behaviour_hash() != task.behaviour_hash():
            mine, theirs = task.model_dump(), as_other.model_dump()
            differing = sorted(k for k in mine if k not in NAME_AND_PROSE and mine[k] != theirs[k])
            raise TaskDefinitionError(
                f"task definition {path}: also_models: {name!r} runs this kernel differently ({', '.join(differing)} "
                f"differ), so it needs a task of its own: apex tasks new --model {name} --kernel {task.kernel}")


def _load_all(dirs: Iterable[Path]) -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    for directory in dirs:
        if not directory.is_dir():
            raise TaskDefinitionError(f"task directory {directory} (from {TASK_DIRS_ENV}) does not exist")
        for path in sorted(directory.glob("*.toml")):
            task = load_task_file(path)
            if task.id in tasks:
                raise TaskDefinitionError(f"task definition {path}: task id {task.id!r} is defined twice")
            tasks[task.id] = task
    return tasks


@lru_cache(maxsize=8)
def _cached(dirs: tuple[Path, ...]) -> dict[str, Task]:
    return _load_all(dirs)


def clear_cache() -> None:
    """Forget the definitions read so far (after one was written), so the next lookup reads them."""
    _cached.cache_clear()


def all_tasks() -> dict[str, Task]:
    """Every task, by id (cached per set of definition directories)."""
    return _cached(tuple(definition_dirs()))


def get_task(task_id: str) -> Task:
    tasks = all_tasks()
    if task_id not in tasks:
        raise UnknownNameError("task id", task_id, tasks)
    return tasks[task_id]


def find_tasks(model: str | None = None, kernel: str | None = None) -> list[Task]:
    """Tasks filtered by model (slug or Hugging Face id) and kernel name."""
    tasks = list(all_tasks().values())
    if model:
        slug = get_model(model).slug
        tasks = [t for t in tasks if slug in t.models]
    if kernel:
        kernels = {t.kernel for t in all_tasks().values()}
        if kernel not in kernels:
            raise UnknownNameError("kernel", kernel, kernels)
        tasks = [t for t in tasks if t.kernel == kernel]
    return sorted(tasks, key=lambda t: t.id)
